//! How many devices a workload's stages want running at a moment of the run.

use std::time::Duration;

use crate::workload::format::Stage;

/// How many devices should run `elapsed` into the run: ramped linearly within each stage from
/// the last stage's count (0 at the start); `None` once the last stage has ended.
pub fn target(stages: &[Stage], elapsed: Duration) -> Option<usize> {
    let mut from = 0usize;
    let mut began = Duration::ZERO;
    for stage in stages {
        let ends = began + stage.duration.0;
        if elapsed < ends {
            let part = (elapsed - began).as_secs_f64() / stage.duration.0.as_secs_f64();
            let count = from as f64 + (stage.devices as f64 - from as f64) * part;
            return Some(count.round() as usize);
        }
        from = stage.devices;
        began = ends;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::scenario::Dur;

    fn stage(seconds: u64, devices: usize) -> Stage {
        Stage {
            duration: Dur(Duration::from_secs(seconds)),
            devices,
        }
    }

    #[test]
    fn stages_ramp_up_hold_and_ramp_down_then_end() {
        let stages = [stage(10, 100), stage(20, 100), stage(10, 0)];
        let at = |s: f64| target(&stages, Duration::from_secs_f64(s));
        assert_eq!(at(0.0), Some(0));
        assert_eq!(at(5.0), Some(50));
        assert_eq!(at(10.0), Some(100));
        assert_eq!(at(29.9), Some(100));
        assert_eq!(at(35.0), Some(50));
        assert_eq!(at(40.0), None);
        // A stage of no time jumps to its count.
        let jump = [stage(0, 30), stage(5, 30)];
        assert_eq!(target(&jump, Duration::from_secs(1)), Some(30));
    }
}
