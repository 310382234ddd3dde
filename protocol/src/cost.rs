//! What a piece of protocol work cost on the WAN, measured by the node that did it: the
//! inter-DC messages it sent and received (requests and replies) and the inter-DC round
//! trips on its critical path. Nested work (a primary replicating to its secondaries
//! before answering) travels back in the reply, so the coordinator's totals are what was
//! really sent (RedT Table 2, measured rather than derived).

/// Inter-DC messages and round trips.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Inter-DC messages, requests and replies.
    pub messages: u64,
    /// Inter-DC round trips on the critical path.
    pub round_trips: u64,
}

impl From<Cost> for crate::stats::TxnCost {
    /// The counters of an answered transaction from the cost of its answer's path: the
    /// messages, and its round trips as both the inter-DC and the client round trips.
    fn from(c: Cost) -> Self {
        crate::stats::TxnCost {
            inter_dc_messages: c.messages,
            round_trips: c.round_trips,
            client_round_trips: c.round_trips,
        }
    }
}

impl Cost {
    /// The cost of one request/reply to a peer (`inter_dc`: in another DC) whose handling
    /// cost `nested` before it answered.
    pub fn rpc(inter_dc: bool, nested: Cost) -> Cost {
        if inter_dc {
            Cost { messages: nested.messages + 2, round_trips: nested.round_trips + 1 }
        } else {
            nested
        }
    }

    /// `self`, then `next` after it (round trips add up).
    pub fn then(self, next: Cost) -> Cost {
        Cost { messages: self.messages + next.messages, round_trips: self.round_trips + next.round_trips }
    }

    /// `self` and `other` in parallel (round trips: the longer of the two).
    pub fn alongside(self, other: Cost) -> Cost {
        Cost { messages: self.messages + other.messages, round_trips: self.round_trips.max(other.round_trips) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_rounds_add_up_and_parallel_rounds_take_the_longest() {
        let secondary = Cost::rpc(true, Cost::default());
        assert_eq!(secondary, Cost { messages: 2, round_trips: 1 });
        // A primary in another DC that replicated to two secondaries before answering.
        let primary = Cost::rpc(true, secondary.alongside(secondary));
        assert_eq!(primary, Cost { messages: 6, round_trips: 2 });
        // The same primary in the coordinator's DC: only the nested work crosses the WAN.
        assert_eq!(Cost::rpc(false, secondary.alongside(secondary)), Cost { messages: 4, round_trips: 1 });
        let phase = primary.alongside(secondary);
        assert_eq!(phase, Cost { messages: 8, round_trips: 2 });
        assert_eq!(phase.then(secondary), Cost { messages: 10, round_trips: 3 });
    }
}
