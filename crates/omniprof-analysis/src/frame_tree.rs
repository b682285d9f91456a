//! Stacks of frames as a tree: a node per distinct stack, holding its innermost frame and
//! the node of the stack around it, so a stack costs one number however deep it is and each
//! frame's name is stored once. The Python stacks of ops ([`super::stacks`]) and the flame
//! graph's stacks ([`super::flamegraph`]) are both kept this way.

use std::sync::Arc;

use omniprof_trace::FastMap;

/// The most frames a stack holds: a frame deeper than this is not added (its caller stands
/// for it) and is counted. Real stacks are far shallower (Python's own recursion limit is
/// 1000); the limit bounds folded text, which repeats every frame of a stack on each of its
/// lines: unbounded, 20,000 nested ops are 200 million frames to write.
pub const MAX_STACK_DEPTH: usize = 1024;

pub(super) struct FrameTree {
    /// Per node: its parent, its frame (an index into `names`) and its depth.
    nodes: Vec<(u32, u32, u32)>,
    children: FastMap<(u32, u32), u32>,
    names: Vec<Arc<str>>,
    name_ids: FastMap<Arc<str>, u32>,
    /// Frames not added because their parent was [`MAX_STACK_DEPTH`] deep.
    pub(super) cut: u64,
}

impl Default for FrameTree {
    fn default() -> Self {
        Self {
            nodes: vec![(Self::ROOT, 0, 0)],
            children: FastMap::default(),
            names: Vec::new(),
            name_ids: FastMap::default(),
            cut: 0,
        }
    }
}

impl FrameTree {
    /// The empty stack.
    pub(super) const ROOT: u32 = 0;

    /// The node of frame `name` called inside `parent`; `parent` itself, counted as cut, when
    /// `parent` is [`MAX_STACK_DEPTH`] deep already.
    pub(super) fn child(&mut self, parent: u32, name: &str) -> u32 {
        let depth = self.nodes[parent as usize].2 + 1;
        if depth as usize > MAX_STACK_DEPTH {
            self.cut += 1;
            return parent;
        }
        let name = match self.name_ids.get(name) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.names.len()).expect("fewer than 2^32 frame names");
                let name: Arc<str> = Arc::from(name);
                self.names.push(Arc::clone(&name));
                self.name_ids.insert(name, id);
                id
            }
        };
        let next = u32::try_from(self.nodes.len()).expect("fewer than 2^32 stacks");
        let node = *self.children.entry((parent, name)).or_insert(next);
        if node == next {
            self.nodes.push((parent, name, depth));
        }
        node
    }

    /// How many frames the stack `node` holds.
    pub(super) fn depth(&self, node: u32) -> usize {
        self.nodes[node as usize].2 as usize
    }

    /// The frames of `node`, innermost first.
    pub(super) fn frames(&self, mut node: u32) -> impl Iterator<Item = &Arc<str>> {
        std::iter::from_fn(move || {
            (node != Self::ROOT).then(|| {
                let (parent, name, _) = self.nodes[node as usize];
                node = parent;
                &self.names[name as usize]
            })
        })
    }
}
