//! The compiled form of a set of paths: a tree of field names and `[*]`, shared by applying
//! and by decoding.

use crate::vocab::path::{FieldPath, Segment};

/// A compiled set of paths. `terminal`: the path ends here (keep or drop the whole value).
/// Children of a terminal node are pruned. After [`Node::normalize`], every named child also
/// includes what the `[*]` child selects, so that a lookup is `field(k).or(any)`.
#[derive(Clone, Debug, Default)]
pub(super) struct Node {
    pub(super) terminal: bool,
    pub(super) fields: Vec<(Box<str>, Node)>,
    pub(super) any: Option<Box<Node>>,
}

impl Node {
    pub(super) fn compile(paths: impl IntoIterator<Item = FieldPath>) -> Node {
        let mut root = Node::default();
        for path in paths {
            let mut node = &mut root;
            for segment in path.segments() {
                if node.terminal {
                    break;
                }
                node = match segment {
                    Segment::Any => node.any.get_or_insert_with(Default::default),
                    Segment::Field(name) => {
                        let at = match node.fields.iter().position(|(k, _)| **k == **name) {
                            Some(at) => at,
                            None => {
                                node.fields.push((name.as_str().into(), Node::default()));
                                node.fields.len() - 1
                            }
                        };
                        &mut node.fields[at].1
                    }
                };
            }
            node.terminal = true;
        }
        root.normalize();
        root
    }

    fn normalize(&mut self) {
        if self.terminal {
            self.fields.clear();
            self.any = None;
            return;
        }
        if let Some(any) = &mut self.any {
            any.normalize();
        }
        let any = self.any.as_deref();
        for (_, child) in &mut self.fields {
            if let Some(any) = any {
                child.merge(any);
            }
            child.normalize();
        }
    }

    fn merge(&mut self, other: &Node) {
        self.terminal |= other.terminal;
        if self.terminal {
            return;
        }
        for (name, theirs) in &other.fields {
            match self.fields.iter_mut().find(|(k, _)| k == name) {
                Some((_, mine)) => mine.merge(theirs),
                None => self.fields.push((name.clone(), theirs.clone())),
            }
        }
        if let Some(theirs) = &other.any {
            match &mut self.any {
                Some(mine) => mine.merge(theirs),
                None => self.any = Some(theirs.clone()),
            }
        }
    }

    #[inline]
    pub(super) fn child(&self, key: &str) -> Option<&Node> {
        self.fields
            .iter()
            .find(|(k, _)| **k == *key)
            .map(|(_, n)| n)
            .or(self.any.as_deref())
    }
}
