//! The CI recipes in `docs/recipes` say what `harness run` understands: each `harness run` line
//! in them parses with the command's own arguments, and the example baseline loads.

mod common;

use clap::Parser;
use common::root;
use harness_cli::matrix::RunArgs;

#[derive(Debug, Parser)]
struct Run {
    #[command(flatten)]
    args: RunArgs,
}

/// The `harness run` command of a recipe: its line and the option lines after it, with the
/// CI's matrix variables given a cell's values.
fn harness_run(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| !l.contains("harness run"));
    let mut command = lines.next().expect("a `harness run` line").to_string();
    for line in lines {
        let line = line.trim();
        if !line.starts_with("--") {
            break;
        }
        command.push(' ');
        command.push_str(line);
    }
    command
        .replace('\\', " ")
        .replace("${{ matrix.protocol }}", "1")
        .replace("${{ matrix.spec }}", "1.1.0")
        .replace("\"$PROTOCOL\"", "1")
        .replace("\"$SPEC\"", "1.1.0")
}

/// Words as `sh` splits them, for the quoting the recipes use (single and double quotes).
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

#[test]
fn each_recipe_s_harness_run_parses() {
    for recipe in ["github-actions.yml", "gitlab-ci.yml"] {
        let text =
            std::fs::read_to_string(root().join("docs/recipes").join(recipe)).expect("the recipe");
        let command = harness_run(&text);
        let words = words(&command);
        let at = words.iter().position(|w| w == "run").expect("`run`");
        let mut argv = vec!["harness".to_string()];
        argv.extend(words[at + 1..].iter().cloned());
        let run = Run::try_parse_from(&argv).unwrap_or_else(|e| panic!("{recipe}: {e}\n{argv:?}"));
        assert!(
            run.args.exec.is_some(),
            "{recipe} starts the system under test"
        );
        assert!(
            run.args.expected_failures.is_some(),
            "{recipe} has a baseline"
        );
        assert!(
            run.args.reports.iter().any(|r| r.starts_with("junit:")),
            "{recipe} writes JUnit"
        );
        assert_eq!(run.args.protocols, [1], "{recipe}: one cell a job");
    }
}

#[test]
fn the_example_baseline_loads() {
    let entries =
        harness_cli::baseline::load(&root().join("docs/recipes/expected-failures.example.yaml"))
            .expect("it loads");
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[2].protocol, Some(1));
}
