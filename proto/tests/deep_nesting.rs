//! Fuzz-style property of the topology loader's depth bound: text nested by any mix of block
//! mappings, block sequences, flow sequences and flow mappings, closed or not, is refused with
//! `ConfigError::TooDeep` naming the line once it nests past `MAX_TOPOLOGY_DEPTH`, never
//! overflows the stack, and is not refused for depth when it nests a little.

use proptest::prelude::*;
use redt_proto::{ConfigError, Topology, MAX_TOPOLOGY_DEPTH};

#[derive(Clone, Copy, Debug)]
enum Block {
    /// `k:` and the nested node on the next line, indented.
    Map,
    /// `-` and the nested node on the next line, indented.
    Seq,
    /// `- ` and the nested node on the same line.
    InlineSeq,
}

#[derive(Clone, Copy, Debug)]
enum Flow {
    Seq,
    Map,
}

/// The text of `block` levels then `flow` levels around a scalar, the flow ones closed when
/// `closed`; returns it with the number of collections it nests, and the line the flow part
/// is on (from 1).
fn nest(block: &[Block], flow: &[Flow], closed: bool, spaces: usize) -> (String, usize, usize) {
    let mut text = String::new();
    let mut indent = 0;
    let mut inline = String::new();
    let mut lines = 1;
    for b in block {
        match b {
            Block::Map | Block::Seq => {
                let key = if matches!(b, Block::Map) { "k:" } else { "-" };
                text.push_str(&format!("{}{inline}{key}\n", " ".repeat(indent)));
                lines += 1;
                indent += inline.len() + spaces;
                inline.clear();
            }
            Block::InlineSeq => inline.push_str("- "),
        }
    }
    text.push_str(&" ".repeat(indent));
    text.push_str(&inline);
    text.push_str("v: ");
    for f in flow {
        text.push_str(match f {
            Flow::Seq => "[",
            Flow::Map => "{k: ",
        });
    }
    text.push('1');
    if closed {
        for f in flow.iter().rev() {
            text.push(match f {
                Flow::Seq => ']',
                Flow::Map => '}',
            });
        }
    }
    text.push('\n');
    (text, block.len() + 1 + flow.len(), lines)
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![Just(Block::Map), Just(Block::Seq), Just(Block::InlineSeq)]
}

fn flow() -> impl Strategy<Value = Flow> {
    prop_oneof![Just(Flow::Seq), Just(Flow::Map)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn nesting_past_the_bound_is_refused_with_its_line(
        block in proptest::collection::vec(block(), 0..200),
        flow in proptest::collection::vec(flow(), 0..3000),
        closed in any::<bool>(),
        spaces in 1usize..4,
    ) {
        let (text, levels, flow_line) = nest(&block, &flow, closed, spaces);
        prop_assume!(levels > MAX_TOPOLOGY_DEPTH);
        match Topology::from_yaml("deep.yaml", &text) {
            Err(ConfigError::TooDeep { line, depth, max, .. }) => {
                prop_assert_eq!(max, MAX_TOPOLOGY_DEPTH);
                prop_assert_eq!(depth, MAX_TOPOLOGY_DEPTH + 1);
                prop_assert!(line <= flow_line, "line {} past the text's {}", line, flow_line);
            }
            other => prop_assert!(false, "expected TooDeep, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn shallow_nesting_is_not_refused_for_depth(
        block in proptest::collection::vec(block(), 0..16),
        flow in proptest::collection::vec(flow(), 0..16),
        closed in any::<bool>(),
        spaces in 1usize..4,
    ) {
        let (text, _, _) = nest(&block, &flow, closed, spaces);
        // Not a topology, so refused, but by the parser, not for its depth.
        let r = Topology::from_yaml("shallow.yaml", &text);
        prop_assert!(!matches!(r, Err(ConfigError::TooDeep { .. })), "{:?}\n{}", r.map(|_| ()), text);
    }
}
