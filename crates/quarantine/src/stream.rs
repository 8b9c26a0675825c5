//! The provenance gate over a reader's stdout while the reader is still writing it.
//!
//! A reader that writes its array element by element (the built-in `extract` does) has most of its
//! references checked before it exits, on the supervisor's core while the reader works on its own, so the
//! gate adds little to the run's wall time. This is only a faster route to the same answer: the moment the
//! output stops looking like a well-formed JSON array, streaming gives up, and the runner judges the whole
//! output at the end exactly as it would have without it (same references, same errors).

use serde_json::value::RawValue;

use crate::gate::{BorrowedReference, Rejected, SourceSet, TypedReference};

/// Where the stream is in the array's grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the opening `[`.
    Start,
    /// After `[`: an element or `]`.
    First,
    /// After `,`: an element.
    Next,
    /// After an element: `,` or `]`.
    After,
    /// After the closing `]`: only whitespace may follow.
    Closed,
    /// Not a clean array (or not valid UTF-8): the runner judges the whole output instead.
    GaveUp,
}

/// Gates a JSON array of references as its bytes arrive; see the module documentation.
#[derive(Debug)]
pub struct StreamingGate<'a> {
    sources: &'a SourceSet,
    state: State,
    /// Everything before this offset has been judged.
    offset: usize,
    /// An element is cut off at the end of what has arrived: try again once the output is this long.
    /// Waiting for it to double makes a reader that dribbles one byte at a time cost linear work, not
    /// quadratic.
    retry_at: usize,
    valid: Vec<TypedReference>,
    rejected: Vec<Rejected>,
    /// The file the last reference named.
    last_file: Option<usize>,
}

impl<'a> StreamingGate<'a> {
    /// A gate that checks against `sources`.
    pub fn new(sources: &'a SourceSet) -> Self {
        StreamingGate {
            sources,
            state: State::Start,
            offset: 0,
            retry_at: 0,
            valid: Vec::new(),
            rejected: Vec::new(),
            last_file: None,
        }
    }

    /// Judges what can be judged of `output`, everything the reader has written so far (it only grows).
    pub fn feed(&mut self, output: &[u8]) {
        if output.len() >= self.retry_at {
            self.advance(output, false);
        }
    }

    /// The gate's answer for the whole `output`, or `None` when it was not a clean JSON array and must be
    /// judged whole ([`crate::parse_output`], then [`SourceSet::validate`]).
    pub fn finish(mut self, output: &[u8]) -> Option<(Vec<TypedReference>, Vec<Rejected>)> {
        self.advance(output, true);
        (self.state == State::Closed).then_some((self.valid, self.rejected))
    }

    fn advance(&mut self, output: &[u8], complete: bool) {
        loop {
            let Some(rest) = output.get(self.offset..) else {
                self.state = State::GaveUp;
                return;
            };
            let skipped = rest.iter().take_while(|b| is_json_space(**b)).count();
            self.offset += skipped;
            let Some(&byte) = rest.get(skipped) else {
                return;
            };
            match (self.state, byte) {
                (State::Start, b'[') => self.state = State::First,
                (State::First | State::After, b']') => self.state = State::Closed,
                (State::After, b',') => self.state = State::Next,
                (State::First | State::Next, _) => {
                    if !self.element(output, complete) {
                        return;
                    }
                    continue;
                }
                _ => {
                    self.state = State::GaveUp;
                    return;
                }
            }
            self.offset += 1;
        }
    }

    /// Gates the element at `offset`; false when it is not all there yet, or the stream gave up.
    fn element(&mut self, output: &[u8], complete: bool) -> bool {
        let rest = output.get(self.offset..).unwrap_or_default();
        let index = self.valid.len() + self.rejected.len();
        // Most elements are well-formed references: parsed once, borrowing their strings. Anything else
        // takes the general route, which judges it exactly as the whole-output gate would.
        let mut references =
            serde_json::Deserializer::from_slice(rest).into_iter::<BorrowedReference>();
        let (len, judged) = if let Some(Ok(reference)) = references.next() {
            let len = references.byte_offset();
            let (judged, file) = self.sources.gate_borrowed(index, reference, self.last_file);
            self.last_file = file;
            (len, judged)
        } else {
            let mut elements = serde_json::Deserializer::from_slice(rest).into_iter::<&RawValue>();
            match elements.next() {
                Some(Ok(raw)) => (elements.byte_offset(), self.sources.gate(index, raw)),
                // Not only "unexpected end": a number cut short (`-4.`) is a syntax error until the rest
                // comes. A real error stays one however much arrives, and is settled by `finish`.
                Some(Err(_)) if !complete => {
                    self.wait_for_more(output);
                    return false;
                }
                _ => {
                    self.state = State::GaveUp;
                    return false;
                }
            }
        };
        let end = self.offset + len;
        if !self.delimited(output, end) && !complete {
            // Judged too early (cut off, or a number that may go on): judged again when more has come.
            self.wait_for_more(output);
            return false;
        }
        match judged {
            Ok(reference) => self.valid.push(reference),
            Err(rejected) => self.rejected.push(rejected),
        }
        self.offset = end;
        self.state = State::After;
        true
    }

    /// Whether a byte other than whitespace has arrived after `end`. A number or a literal cut off by the
    /// end of the data parses as a shorter one: an element counts only once the byte after it is here.
    fn delimited(&self, output: &[u8], end: usize) -> bool {
        output
            .get(end..)
            .is_some_and(|after| after.iter().any(|b| !is_json_space(*b)))
    }

    fn wait_for_more(&mut self, output: &[u8]) {
        let pending = output.len().saturating_sub(self.offset);
        self.retry_at = output.len().saturating_add(pending.max(1));
    }
}

/// JSON's four whitespace bytes.
fn is_json_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}
