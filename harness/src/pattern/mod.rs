//! Patterns for received messages, templates for sent ones, and variables
//! shared between them.
//!
//! # Variables in templates
//!
//! Any string in a message template (values *and* object keys) may refer to
//! a variable with `${path}`. A path is a variable name followed by `.field`
//! and `[index]` steps: `${session.id}`, `${items[0].name}`. Field names may
//! contain `/` and `-`, but not `.` or `[`.
//!
//! ```yaml
//! vars: { protocol: 2, client: { name: lembas } }
//! send:
//!   params:
//!     protocol: "${protocol}"          # whole string: the number 2
//!     greeting: "hi ${client.name}"    # inside text: "hi lembas"
//!     info: "${client}"                # whole string: the object itself
//!     note: "costs $${price}"          # escape: the text "costs ${price}"
//! ```
//!
//! A string that is exactly one `${path}` is replaced by the variable's value
//! with its JSON type. Inside longer text, strings are inserted without
//! quotes and anything else as compact JSON. An unknown variable or a
//! missing `}` is an error naming where it happened.
//!
//! # Patterns for received messages
//!
//! * **Scalars** match by equality; numbers by value (`1` matches `1.0`).
//! * **Objects match partially**: every key in the pattern must match,
//!   extra keys in the message are fine.
//! * **Arrays match element by element**: same length, same order, each
//!   element a pattern (so objects inside them match partially too).
//!
//! ```yaml
//! expect:
//!   method: session/update            # must be exactly this string
//!   params:
//!     sessionId: "$string"            # any string
//!     seq: "$integer"
//!     error: "$absent"                # the key must NOT be there
//! ```
//!
//! ## Placeholders
//!
//! | placeholder | matches |
//! |---|---|
//! | `"$any"` | any value, including `null`, as long as it is present |
//! | `"$string"`, `"$number"`, `"$boolean"`, `"$object"`, `"$array"`, `"$null"` | a value of that type |
//! | `"$integer"` | a number without fractional part (`3` or `3.0`) |
//! | `"$absent"` | the key is missing; only allowed as the value of a key (also inside `$one_of`/`$not` there) |
//!
//! Any other string starting with `$` and a letter is rejected when the
//! scenario loads, which catches typos such as `"$strnig"`. To match a
//! literal string that starts with `$`, double it: `"$$string"` matches the
//! text `$string`. `$` followed by anything but a letter (`"$5"`) is literal.
//!
//! ## Operators
//!
//! An object whose keys all start with `$` is an operator; mixing `$` keys
//! with plain keys is an error. A literal key starting with `$` is written
//! doubled: `{"$$schema": "..."}` matches the key `$schema`.
//!
//! ```yaml
//! id:       { $regex: "^ses_" }              # a string matching the regex (search, not full match)
//! tools:    { $contains: [ {name: read}, {name: write} ] }
//!                                            # an array with a distinct element for each
//!                                            # pattern, any order, extras allowed
//! meta:     { $exact: {a: 1} }               # deep equality, no extra keys anywhere inside;
//!                                            # the operand is taken literally (no placeholders)
//! status:   { $one_of: [ok, partial] }       # any alternative matches
//! reason:   { $not: cancelled }              # present and not matching the pattern
//! session:  { $capture: sid }                # any present value, saved as variable `sid`
//! token:    { $capture: tok, $match: { $regex: "^t" } }
//!                                            # must match, then saved as `tok`
//! items:    { $len: 3 }                      # array elements, string characters or object keys
//! caps:     { $each: { $one_of: [a, b] } }   # an array whose every element matches (empty passes)
//! ```
//!
//! Operators cannot be combined in one object, except `$capture` with
//! `$match`. Captures become available (as `${sid}`) only when the whole
//! pattern matched. Inside `$one_of` the first matching alternative's
//! captures are kept; inside `$not` captures are ignored.
//!
//! ## Reports
//!
//! Matching collects every mismatch, each with the path in the message
//! (`result.items[2].name`, `$` for the whole message), what was expected
//! and what was received:
//!
//! ```text
//! params.protocol: expected 2, got 1
//! params.x: expected a string, got nothing
//! ```
//!
//! [`render_diff`] adds a unified diff of the pattern against the message,
//! narrowed to the keys the pattern mentions, and [`nearest`] picks the
//! received message closest to an expectation that was never met.

mod compile;
mod diff;
mod matching;
mod path;
mod vars;

#[cfg(test)]
mod proptests;

pub use compile::{OPERATORS, Pattern, PatternError, PatternErrorKind};
pub use diff::render_diff;
pub use matching::{MatchOutcome, Mismatch, nearest};
pub use vars::{BASE64_OF, BASE64_OF_MAX, SubstError, Vars, generated, substitute};
