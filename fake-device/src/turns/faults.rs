//! What a misbehaving device gets wrong in its turns, resolved once from its [`Misbehaviours`]
//! when the sessions are set up. The turn code reads `faults.x`; the rule ids live here only, so
//! each fault says in one place which rule (and which way of breaking it) it stands for.

use harness::rules::{Misbehaviours, ids};

/// Everything the turns get wrong on purpose, by the part of a turn it touches; all off by
/// default (a device that follows the spec).
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// How a `session/prompt` is read and admitted.
    pub intake: IntakeFaults,
    /// What a turn's events say.
    pub events: EventFaults,
    /// How a command that is an action (or a mode) acts.
    pub commands: CommandFaults,
    /// What a turn's answer says and what its history keeps.
    pub answer: AnswerFaults,
    /// How a model's turn asks the model.
    pub model: ModelFaults,
}

impl Faults {
    /// The faults `misbehave` asks for.
    pub fn of(misbehave: &Misbehaviours) -> Faults {
        Faults {
            intake: IntakeFaults::of(misbehave),
            events: EventFaults::of(misbehave),
            commands: CommandFaults::of(misbehave),
            answer: AnswerFaults::of(misbehave),
            model: ModelFaults::of(misbehave),
        }
    }
}

/// How a misbehaving device reads and admits a `session/prompt`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IntakeFaults {
    /// An attached block may be twice the spec's limit.
    pub double_block_limit: bool,
    /// A prompt over the attachment limits is refused as an internal error (-32603).
    pub limits_internal_error: bool,
    /// How the prompt's blocks are misread.
    pub blocks: crate::attachments::Misreads,
    /// How `@path` mentions are misread.
    pub mentions: crate::mentions::Misreads,
    /// The prompt's `Context` (`_meta.lembas`) is not read.
    pub context_unread: bool,
    /// A known turn id is not recognised: the prompt runs as a new turn.
    pub no_dedup: bool,
    /// A finished turn sent again is refused, not given its answer.
    pub done_turn_refused: bool,
    /// A turn still running, sent again, runs once more after it.
    pub running_turn_runs_twice: bool,
    /// A prompt that comes while a turn runs is refused.
    pub busy_refused: bool,
    /// A prompt that comes while a turn runs is answered at once, and never runs.
    pub busy_answered_unrun: bool,
    /// A prompt that comes within [`super::ALONGSIDE_WINDOW`] of the turn before it runs beside
    /// that turn.
    pub quick_alongside: bool,
    /// No prompt is read as a command.
    pub commands_unread: bool,
    /// A built-in prompt command reaches the model as typed.
    pub builtin_as_typed: bool,
    /// A custom command's text is given without what follows its name.
    pub custom_without_arguments: bool,
    /// `@path` in a command's own text is attached too.
    pub command_mentions_attached: bool,
    /// The `@path`s of the last command's own text are attached to the prompt after it.
    pub command_mentions_next_prompt: bool,
}

impl IntakeFaults {
    fn of(m: &Misbehaviours) -> IntakeFaults {
        IntakeFaults {
            double_block_limit: m.breaks(ids::DEVICE_ATTACHMENTS_LIMITS),
            limits_internal_error: m.breaks_way(ids::DEVICE_ATTACHMENTS_LIMITS, "internal_error"),
            blocks: crate::attachments::Misreads {
                joined_by_space: m.breaks(ids::DEVICE_PROMPT_TEXT_JOIN),
                bare_link: m.breaks(ids::DEVICE_PROMPT_RESOURCE_LINK),
                encoded_size: m.breaks(ids::DEVICE_ATTACHMENTS_BLOB),
                unsized_binary: m.breaks_way(ids::DEVICE_ATTACHMENTS_BLOB, "no_size"),
                unnumbered: m.breaks_way(ids::DEVICE_ATTACHMENTS_NAMED, "unnumbered"),
                first_text_only: m.breaks_way(ids::DEVICE_PROMPT_TEXT_JOIN, "first_only"),
                link_dropped: m.breaks_way(ids::DEVICE_PROMPT_RESOURCE_LINK, "dropped"),
            },
            mentions: crate::mentions::Misreads {
                judges_unresolved: m.breaks(ids::DEVICE_FILES_MENTION),
                misreads_hash: m.breaks(ids::DEVICE_FILES_HASH_ESCAPE),
                lists_no_dirs: m.breaks(ids::DEVICE_FILES_DIR_LISTING),
                whole_file: m.breaks_way(ids::DEVICE_FILES_MENTION, "whole_file"),
                hash_in_name: m.breaks_way(ids::DEVICE_FILES_HASH_ESCAPE, "hash_in_name"),
                lists_project: m.breaks_way(ids::DEVICE_FILES_DIR_LISTING, "project_listed"),
            },
            context_unread: m.breaks(ids::DEVICE_CONTEXT_READ),
            no_dedup: m.breaks(ids::DEVICE_TURNS_DEDUP),
            done_turn_refused: m.breaks_way(ids::DEVICE_TURNS_DEDUP, "refused"),
            running_turn_runs_twice: m.breaks_way(ids::DEVICE_TURNS_RELINK, "runs_twice"),
            busy_refused: m.breaks(ids::DEVICE_PROMPT_QUEUED),
            busy_answered_unrun: m.breaks_way(ids::DEVICE_PROMPT_QUEUED, "answered_unrun"),
            quick_alongside: m.breaks_way(ids::DEVICE_PROMPT_QUEUED, "alongside"),
            commands_unread: m.breaks(ids::DEVICE_COMMANDS_ACTIONS),
            builtin_as_typed: m.breaks(ids::DEVICE_COMMANDS_PROMPT_BUILTIN),
            custom_without_arguments: m.breaks_way(ids::DEVICE_COMMANDS_CUSTOM, "no_arguments"),
            command_mentions_attached: m.breaks(ids::DEVICE_FILES_NOT_FROM_COMMAND),
            command_mentions_next_prompt: m
                .breaks_way(ids::DEVICE_FILES_NOT_FROM_COMMAND, "next_prompt"),
        }
    }
}

/// What a misbehaving device's turn events say wrong.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventFaults {
    /// A command turn's `prompt` event shows the command's expanded text, not what was typed.
    pub prompt_expanded: bool,
    /// A command turn's `prompt` event shows the text as typed, then the expanded body.
    pub prompt_typed_and_expanded: bool,
    /// A command turn's `prompt` event shows nothing at all.
    pub prompt_empty: bool,
    /// The `prompt` event lists no attachments.
    pub attachments_unlisted: bool,
    /// A terminal session's `task` events carry no turn id.
    pub terminal_task_unnamed: bool,
    /// A terminal session's `task` events carry another made id than the `prompt` event.
    pub terminal_task_other_id: bool,
    /// The `task` events carry another turn id than the client's.
    pub task_other_turn_id: bool,
    /// The turn's `task` start is said twice.
    pub start_twice: bool,
    /// The turn's `task` end is said twice.
    pub end_twice: bool,
    /// A prompt command's answer does not name it.
    pub command_unnamed: bool,
    /// A plain prompt's answer is named as a command, by its first word.
    pub plain_named: bool,
}

impl EventFaults {
    fn of(m: &Misbehaviours) -> EventFaults {
        EventFaults {
            prompt_expanded: m.breaks(ids::DEVICE_EVENT_PROMPT_TEXT),
            prompt_typed_and_expanded: m
                .breaks_way(ids::DEVICE_EVENT_PROMPT_TEXT, "typed_and_expanded"),
            prompt_empty: m.breaks_way(ids::DEVICE_EVENT_PROMPT_TEXT, "empty"),
            attachments_unlisted: m.breaks(ids::DEVICE_ATTACHMENTS_NAMED),
            terminal_task_unnamed: m.breaks(ids::DEVICE_TASK_TERMINAL_TURN),
            terminal_task_other_id: m.breaks_way(ids::DEVICE_TASK_TERMINAL_TURN, "other_id"),
            task_other_turn_id: m.breaks_way(ids::DEVICE_PROMPT_TURN_ID, "task_other"),
            start_twice: m.breaks_way(ids::DEVICE_EVENT_TASK_PAIRED, "start_twice"),
            end_twice: m.breaks(ids::DEVICE_EVENT_TASK_PAIRED),
            command_unnamed: m.breaks(ids::DEVICE_PROMPT_COMMAND_NAMED),
            plain_named: m.breaks_way(ids::DEVICE_PROMPT_COMMAND_NAMED, "plain_named"),
        }
    }
}

/// How a misbehaving device's commands act (or change the mode) when their turn runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandFaults {
    /// `/undo` with nothing to undo is told as an empty turn undone.
    pub undo_nothing_as_empty: bool,
    /// `/undo` with nothing to undo goes on to the model.
    pub undo_nothing_to_model: bool,
    /// `/review` with nothing to review says no sentence.
    pub nothing_message_omitted: bool,
    /// `/review` with nothing to review gives a flag in place of the sentence.
    pub nothing_message_flag: bool,
    /// `/plan` changes the mode, and no `current_mode_update` says so.
    pub plan_mode_unreported: bool,
    /// `/plan`'s `current_mode_update` names the mode the session was in.
    pub plan_mode_old_reported: bool,
    /// `/plan <task>` runs the task in the mode the session was in.
    pub plan_task_in_mode: bool,
    /// `/plan <task>` is taken for `/plan`, the task dropped.
    pub plan_task_dropped: bool,
    /// A built-in prompt command runs as an action, sending nothing.
    pub builtin_sends_nothing: bool,
    /// A `/name` outside the command set is swallowed, as if an action.
    pub unknown_swallowed: bool,
    /// A command's mode is put as it is, above `max_mode` or not.
    pub mode_unlowered: bool,
    /// A command's mode is lowered past `max_mode`, to plan.
    pub mode_too_low: bool,
}

impl CommandFaults {
    fn of(m: &Misbehaviours) -> CommandFaults {
        CommandFaults {
            undo_nothing_as_empty: m.breaks(ids::DEVICE_COMMANDS_UNDO_NOTHING),
            undo_nothing_to_model: m.breaks_way(ids::DEVICE_COMMANDS_UNDO_NOTHING, "to_model"),
            nothing_message_omitted: m.breaks(ids::DEVICE_COMMANDS_NOTHING_MESSAGE),
            nothing_message_flag: m.breaks_way(ids::DEVICE_COMMANDS_NOTHING_MESSAGE, "flag"),
            plan_mode_unreported: m.breaks(ids::DEVICE_MODE_UPDATE),
            plan_mode_old_reported: m.breaks_way(ids::DEVICE_MODE_UPDATE, "old_mode"),
            plan_task_in_mode: m.breaks(ids::DEVICE_COMMANDS_PLAN_TASK),
            plan_task_dropped: m.breaks_way(ids::DEVICE_COMMANDS_PLAN_TASK, "task_dropped"),
            builtin_sends_nothing: m
                .breaks_way(ids::DEVICE_COMMANDS_PROMPT_BUILTIN, "nothing_sent"),
            unknown_swallowed: m.breaks_way(ids::DEVICE_COMMANDS_ACTIONS, "unknown_swallowed"),
            mode_unlowered: m.breaks(ids::DEVICE_COMMANDS_MODE_LOWERED),
            mode_too_low: m.breaks_way(ids::DEVICE_COMMANDS_MODE_LOWERED, "too_low"),
        }
    }
}

/// What a misbehaving device's answer to a prompt says wrong, and what its history keeps wrong.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnswerFaults {
    /// The answer to a prompt without a `turnId` names another made id than its events did.
    pub made_id_other: bool,
    /// The answer to a prompt without a `turnId` names no turn at all.
    pub made_id_absent: bool,
    /// No answer names its turn.
    pub turn_id_absent: bool,
    /// The stop reason is `done`, which the spec does not have.
    pub stop_reason_unknown: bool,
    /// The answer has no stop reason at all.
    pub stop_reason_absent: bool,
    /// A cancelled turn is said to have ended by itself (`end_turn`).
    pub cancelled_as_end_turn: bool,
    /// The user's text is kept in the history with what its attachments added.
    pub history_with_attached: bool,
    /// What the person typed with attachments is not kept in the history, only them.
    pub history_no_typed: bool,
    /// A deleted session's stopped turn leaves its prompt unanswered.
    pub deleted_unanswered: bool,
}

impl AnswerFaults {
    fn of(m: &Misbehaviours) -> AnswerFaults {
        AnswerFaults {
            made_id_other: m.breaks(ids::DEVICE_TURNS_MADE_ID),
            made_id_absent: m.breaks_way(ids::DEVICE_TURNS_MADE_ID, "absent"),
            turn_id_absent: m.breaks(ids::DEVICE_PROMPT_TURN_ID),
            stop_reason_unknown: m.breaks(ids::DEVICE_PROMPT_ANSWER),
            stop_reason_absent: m.breaks_way(ids::DEVICE_PROMPT_ANSWER, "no_reason"),
            cancelled_as_end_turn: m.breaks_way(ids::DEVICE_CANCEL_TURN, "end_turn"),
            history_with_attached: m.breaks(ids::DEVICE_HISTORY_TEXT),
            history_no_typed: m.breaks_way(ids::DEVICE_HISTORY_TEXT, "no_typed"),
            deleted_unanswered: m.breaks_way(ids::DEVICE_DELETE_STOPS, "unanswered"),
        }
    }
}

/// How a misbehaving device's model turn asks the model.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelFaults {
    /// A command's own model is not used for its prompt.
    pub command_model_ignored: bool,
    /// A command's own model stays the session's after its prompt.
    pub command_model_kept: bool,
    /// The model is asked for by the device's ref, not the instance's served id.
    pub model_ref_sent: bool,
    /// How the system text is composed wrong.
    pub system: crate::system_prompt::Misreads,
}

impl ModelFaults {
    fn of(m: &Misbehaviours) -> ModelFaults {
        ModelFaults {
            command_model_ignored: m.breaks_way(ids::DEVICE_COMMANDS_MODEL_RESTORED, "ignored"),
            command_model_kept: m.breaks(ids::DEVICE_COMMANDS_MODEL_RESTORED),
            model_ref_sent: m.breaks(ids::DEVICE_MODEL_SERVED_ID),
            system: crate::system_prompt::Misreads {
                no_heading: m.breaks(ids::DEVICE_CONTEXT_INSTRUCTIONS_HEADING),
                own_personalization: m.breaks(ids::DEVICE_CONTEXT_PERSONALIZATION),
                no_library: m.breaks(ids::DEVICE_CONTEXT_LIBRARY),
                prototypes_always: m.breaks(ids::DEVICE_CONTEXT_PROTOTYPES),
                empty_heading: m
                    .breaks_way(ids::DEVICE_CONTEXT_INSTRUCTIONS_HEADING, "empty_section"),
                no_sources: m.breaks_way(ids::DEVICE_CONTEXT_PROTOTYPES, "no_sources"),
            },
        }
    }
}
