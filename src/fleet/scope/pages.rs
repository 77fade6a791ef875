//! A scope's list in pages, for an apiserver that refuses streaming lists: the fallback's
//! half of the scope's stream ([`super::stream`] holds the watch that follows it).
//!
//! Decision: our own pages rather than kube-rs's `watcher` (which this used to be), so that the
//! paginated mode says which resourceVersion its list reached, as the streaming mode's
//! initial-events-end bookmark does: a snapshot then records it, and a restart resumes the
//! watch from it instead of listing again. The requests, events and errors are kube-rs's
//! watcher's (`ListWatch`, whose requests with a `limit` carry no `resourceVersion=0`, which
//! would let the watch cache ignore the limit and send everything at once): the first page a
//! consistent read with `limit`, the next ones with the `continue` token as well; `Init`,
//! an `InitApply` per object, then the list's resourceVersion; a failed page is
//! `InitialListFailed` and the list starts again from its first page after the backoff. That
//! includes a 410 on an expired `continue` token (a list slower than etcd's compaction), as
//! client-go's pager and kube-rs's watcher do: a fresh list, not a resumed one.

use std::collections::VecDeque;

use kube::{
    api::{ListParams, WatchParams},
    runtime::watcher,
    Api,
};

use super::{
    super::object::Projected,
    lines,
    stream::{Next, State, Step},
};

/// Objects per page: small, so that the start-up peak stays close to the steady state.
pub(super) const PAGE_SIZE: u32 = 100;

/// A paginated list under way.
pub(super) struct Pages {
    /// The token of the next page; `None` before the first and after the last.
    continue_token: Option<String>,
    /// The objects of the page received, not handed on yet.
    objects: VecDeque<Projected>,
    /// The list's resourceVersion (every page carries the first page's).
    resource_version: Option<String>,
    /// Whether a page has been received.
    started: bool,
}

impl Pages {
    /// A list that has not requested its first page.
    pub(super) fn first() -> Pages {
        Pages {
            continue_token: None,
            objects: VecDeque::new(),
            resource_version: None,
            started: false,
        }
    }
}

/// The list request of a page: the watch's selectors, `limit`, and the `continue` token.
fn list_params(params: &WatchParams, continue_token: Option<String>) -> ListParams {
    ListParams {
        label_selector: params.label_selector.clone(),
        field_selector: params.field_selector.clone(),
        limit: Some(PAGE_SIZE),
        continue_token,
        ..ListParams::default()
    }
}

/// The next object of the list, its end (the list's resourceVersion, then the watch from it),
/// or the next page (`None`: nothing to hand on yet).
pub(super) async fn next(
    api: &Api<Projected>,
    params: &WatchParams,
    shard: Option<&str>,
    mut pages: Pages,
) -> Next {
    if let Some(object) = pages.objects.pop_front() {
        let event = Step::Event(watcher::Event::InitApply(object));
        return (Some(Ok(event)), State::Pages(pages));
    }
    if pages.started && pages.continue_token.is_none() {
        return match pages.resource_version {
            Some(rv) => (
                Some(Ok(Step::InitDone(rv.clone()))),
                State::Resume { rv, confirm: false },
            ),
            None => (Some(Err(watcher::Error::NoResourceVersion)), State::Empty),
        };
    }
    match lines::list(
        api,
        &list_params(params, pages.continue_token.take()),
        shard,
    )
    .await
    {
        Ok(page) => {
            let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
            let pages = Pages {
                continue_token: non_empty(page.metadata.continue_),
                objects: page.items.into(),
                resource_version: non_empty(page.metadata.resource_version),
                started: true,
            };
            (None, State::Pages(pages))
        }
        Err(e) => (
            Some(Err(watcher::Error::InitialListFailed(e))),
            State::Empty,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_carry_the_selectors_and_the_limit_and_then_only_the_token() {
        let params = WatchParams::default()
            .labels("app=a")
            .fields("spec.nodeName=n");
        let first = list_params(&params, None);
        assert_eq!(first.label_selector.as_deref(), Some("app=a"));
        assert_eq!(first.field_selector.as_deref(), Some("spec.nodeName=n"));
        assert_eq!(first.limit, Some(PAGE_SIZE));
        let url = |lp: &ListParams| {
            kube::core::Request::new("/api/v1/pods")
                .list(lp)
                .unwrap()
                .uri()
                .to_string()
        };
        let first = url(&first);
        assert!(first.contains("limit=100"), "{first}");
        // Not resourceVersion=0, which would let the watch cache ignore the limit.
        assert!(!first.contains("resourceVersion"), "{first}");
        let next = url(&list_params(&params, Some("tok".into())));
        assert!(next.contains("continue=tok"), "{next}");
        assert!(next.contains("limit=100"), "{next}");
        assert!(!next.contains("resourceVersion"), "{next}");
        assert!(next.contains("labelSelector=app%3Da"), "{next}");
    }
}
