//! What a topology file's text must satisfy before the YAML parser sees it: at most
//! [`MAX_TOPOLOGY_BYTES`] bytes, and values nested at most [`MAX_TOPOLOGY_DEPTH`] levels
//! deep. The parser keeps its own stack on the heap and its deserializer stops at 128
//! levels, so neither bound guards the stack; they keep the parser's work and memory in
//! proportion to a topology and give a clear error naming the line.
//!
//! The depth is counted by a scan of the text that knows as much YAML as nesting needs:
//! indentation, `- `, `? ` and `: ` that open a nested node on the same line, the flow
//! brackets `[` and `{`, quoted scalars (a bracket in one is text), comments, and literal and
//! folded block scalars (`|`, `>`: their lines are text). Each indentation column in effect,
//! each such indicator and each open bracket counts one, so it counts a value at most about
//! twice as deep as the collections around it. Where it cannot tell text from structure (a
//! plain scalar continued on a line that starts with a quote) it may count less, and the
//! parser's own limit is what stops that.

/// Most bytes a topology file may have: 1 MiB. The files of `configs/` and `deploy/` are
/// under 10 KiB.
pub const MAX_TOPOLOGY_BYTES: usize = 1 << 20;

/// Most levels a value of a topology file may be nested in (each indentation level, each
/// `- ` entry opening a node on its line, each `[` or `{` counts one): 64.
/// The files of `configs/` and `deploy/` go 6 levels deep at most.
pub const MAX_TOPOLOGY_DEPTH: usize = 64;

/// Where a text first nests deeper than a bound: its line (from 1) and the depth there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooDeep {
    pub(crate) line: usize,
    pub(crate) depth: usize,
}

/// Scans `text` for the first point nested deeper than `max` levels (counted as the module
/// docs say). Linear in the text's length; stops at that point.
pub(crate) fn check_depth(text: &str, max: usize) -> Result<(), TooDeep> {
    let mut s = Scan { max, indents: Vec::new(), flow: 0, quote: None, block_scalar: None };
    for (i, line) in text.lines().enumerate() {
        s.line(line.as_bytes()).map_err(|depth| TooDeep { line: i + 1, depth })?;
    }
    Ok(())
}

/// The scan's state, carried from line to line.
struct Scan {
    max: usize,
    /// The block indentation columns in effect, ascending.
    indents: Vec<usize>,
    /// Flow collections open (`[`, `{` not yet closed).
    flow: usize,
    /// The quote character of a quoted scalar still open.
    quote: Option<u8>,
    /// In a literal or folded block scalar: the column its lines are indented beyond.
    block_scalar: Option<usize>,
}

fn is_blank(b: Option<&u8>) -> bool {
    matches!(b, None | Some(b' ' | b'\t'))
}

impl Scan {
    fn depth(&self) -> usize {
        self.indents.len() + self.flow
    }

    fn check(&self) -> Result<(), usize> {
        match self.depth() {
            d if d > self.max => Err(d),
            _ => Ok(()),
        }
    }

    /// One line (without its line break); `Err(depth)` where it nests deeper than `max`.
    fn line(&mut self, b: &[u8]) -> Result<(), usize> {
        let indent = b.iter().take_while(|&&c| c == b' ').count();
        let blank = b[indent..].iter().all(|c| c.is_ascii_whitespace());
        if let Some(col) = self.block_scalar {
            if blank || indent > col {
                return Ok(());
            }
            self.block_scalar = None;
        }
        let mut pos = indent;
        if self.quote.is_none() && self.flow == 0 {
            if blank || b[indent] == b'#' {
                return Ok(());
            }
            while self.indents.last().is_some_and(|&c| c > indent) {
                self.indents.pop();
            }
            if self.indents.last() != Some(&indent) {
                self.indents.push(indent);
                self.check()?;
            }
            // `- x`, `? x`, `: x` at the start open a node at x's column on this line.
            while matches!(b.get(pos), Some(b'-' | b'?' | b':')) && is_blank(b.get(pos + 1)) {
                pos += 1;
                while pos < b.len() && is_blank(b.get(pos)) {
                    pos += 1;
                }
                if pos >= b.len() || b[pos] == b'#' {
                    break;
                }
                self.indents.push(pos);
                self.check()?;
            }
        }
        // A quote opens a quoted scalar only where a scalar may start.
        let mut scalar_start = true;
        let mut after_blank = true;
        while pos < b.len() {
            let c = b[pos];
            match self.quote {
                Some(b'\'') if c == b'\'' => {
                    if b.get(pos + 1) == Some(&b'\'') {
                        pos += 1;
                    } else {
                        self.quote = None;
                        scalar_start = false;
                    }
                }
                Some(b'"') if c == b'\\' => pos += 1,
                Some(b'"') if c == b'"' => {
                    self.quote = None;
                    scalar_start = false;
                }
                Some(_) => {}
                None => match c {
                    b'#' if after_blank => return Ok(()),
                    b'\'' | b'"' if scalar_start => self.quote = Some(c),
                    // In block context a bracket opens a collection only where a node
                    // starts; elsewhere it is text of a plain scalar.
                    b'[' | b'{' if scalar_start || self.flow > 0 => {
                        self.flow += 1;
                        self.check()?;
                        scalar_start = true;
                    }
                    b']' | b'}' if self.flow > 0 => {
                        self.flow -= 1;
                        scalar_start = false;
                    }
                    b',' if self.flow > 0 => scalar_start = true,
                    b':' if is_blank(b.get(pos + 1)) || self.flow > 0 => scalar_start = true,
                    b'-' | b'?' if scalar_start && is_blank(b.get(pos + 1)) => {}
                    b'|' | b'>' if scalar_start && self.flow == 0 => {
                        // A block scalar's header: its lines follow, indented beyond the
                        // node that holds it.
                        let rest = &b[pos + 1..];
                        let rest = &rest[..rest.iter().position(|&x| x == b'#').unwrap_or(rest.len())];
                        if rest.iter().all(|x| x.is_ascii_whitespace() || matches!(x, b'+' | b'-' | b'1'..=b'9')) {
                            self.block_scalar = Some(self.indents.last().copied().unwrap_or(0));
                            return Ok(());
                        }
                        scalar_start = false;
                    }
                    b' ' | b'\t' => {}
                    _ => scalar_start = false,
                },
            }
            after_blank = matches!(c, b' ' | b'\t');
            pos += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_error(text: &str, max: usize) -> Option<TooDeep> {
        check_depth(text, max).err()
    }

    #[test]
    fn counts_indentation_entries_and_brackets() {
        let text = "a:\n  b:\n    - c: [1, {d: [2]}]\n";
        // a(1) b(2) `- `(3) c(4) then `[`, `{`, `[`: 7.
        assert_eq!(depth_error(text, 6), Some(TooDeep { line: 3, depth: 7 }));
        assert_eq!(depth_error(text, 7), None);
    }

    #[test]
    fn brackets_in_quotes_comments_and_block_scalars_are_text() {
        let text = "a: '[[[[' # [[[[\nb: \"[[\\\"[[\"\nc: |\n  [[[[[[\n  {{{{\nd: it's [[ x]]\ne: [x]\n";
        assert_eq!(depth_error(text, 2), None);
        assert_eq!(depth_error(text, 1), Some(TooDeep { line: 7, depth: 2 }), "only `e` opens a collection");
    }

    #[test]
    fn a_flow_collection_across_lines_keeps_its_depth() {
        let text = "a: [\n  [\n    [1]\n  ]\n]\nb: 1\n";
        assert_eq!(depth_error(text, 3), Some(TooDeep { line: 3, depth: 4 }));
        assert_eq!(depth_error(text, 4), None);
    }

    #[test]
    fn closing_brackets_never_make_credit() {
        assert_eq!(depth_error("a: ]]]]]]\nb: [[[\n", 3), Some(TooDeep { line: 2, depth: 4 }));
    }
}
