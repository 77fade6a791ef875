//! A scope's watch and list requests, with their responses decoded by the fleet's own decoder
//! (`fleet::decode`) instead of kube-rs's serde path: the same requests as `Api::watch` and
//! `Api::list`, the same events and errors (`kube::Error`), so the stream's states do not
//! change.
//!
//! A watch response is split into lines here, each checked to be UTF-8 as kube-rs's line codec
//! checks it, and a body error that only means the connection ended (an unexpected EOF, as a
//! proxy's idle timeout or a dropped TLS connection leaves it) ends the events, so that the
//! stream resumes from the last resourceVersion, as kube-rs's `request_events` does; any other
//! body error is `ReadEvents`, after which the response yields nothing more.

use std::io;

use futures::{io::AsyncBufReadExt, stream::BoxStream, AsyncBufRead, StreamExt};
use http::{header::ACCEPT_ENCODING, HeaderValue};
use kube::{
    api::{ListParams, WatchParams},
    core::{ObjectList, Request, WatchEvent},
    Api,
};

use super::super::{decode, object::Projected};

/// The events of one watch request.
pub(super) type Events = BoxStream<'static, kube::Result<WatchEvent<Projected>>>;

/// Starts a watch from `version` (`Api::watch`).
pub(super) async fn watch(
    api: &Api<Projected>,
    params: &WatchParams,
    shard: Option<&str>,
    version: &str,
) -> kube::Result<Events> {
    let request = Request::new(api.resource_url())
        .watch(params, version)
        .map_err(kube::Error::BuildRequest)?;
    let mut request = with_shard(request, shard)?;
    request.extensions_mut().insert("watch");
    // As kube-rs asks for watches: its decompression reads only a gzip stream's first member,
    // and an apiserver that compresses a watch writes a member per event.
    request
        .headers_mut()
        .entry(ACCEPT_ENCODING)
        .or_insert(HeaderValue::from_static("identity"));
    let body = api.clone().into_client().request_stream(request).await?;
    Ok(events(body).boxed())
}

/// Lists a page (`Api::list`).
pub(super) async fn list(
    api: &Api<Projected>,
    params: &ListParams,
    shard: Option<&str>,
) -> kube::Result<ObjectList<Projected>> {
    let request = Request::new(api.resource_url())
        .list(params)
        .map_err(kube::Error::BuildRequest)?;
    let mut request = with_shard(request, shard)?;
    request.extensions_mut().insert("list");
    let text = api.clone().into_client().request_text(request).await?;
    decode::list_body(&text).map_err(kube::Error::SerdeError)
}

/// The request with the apiserver's `shardSelector` parameter (KEP-5866) added, if any; kube-rs's
/// `ListParams` and `WatchParams` do not have it yet.
fn with_shard(
    mut request: http::Request<Vec<u8>>,
    shard: Option<&str>,
) -> kube::Result<http::Request<Vec<u8>>> {
    let Some(shard) = shard else {
        return Ok(request);
    };
    let uri = request.uri().to_string();
    let sep = if uri.contains('?') { '&' } else { '?' };
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("shardSelector", shard)
        .finish();
    *request.uri_mut() =
        format!("{uri}{sep}{query}")
            .parse()
            .map_err(|e: http::uri::InvalidUri| {
                kube::Error::BuildRequest(kube::core::request::Error::BuildRequest(e.into()))
            })?;
    Ok(request)
}

/// The events of a watch response's body, a line each.
fn events(
    body: impl AsyncBufRead + Send + Unpin + 'static,
) -> impl futures::Stream<Item = kube::Result<WatchEvent<Projected>>> + Send {
    futures::stream::unfold(Some((body, Vec::new())), |state| async move {
        let (mut body, mut line) = state?;
        loop {
            line.clear();
            match body.read_until(b'\n', &mut line).await {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if ends_quietly(&e) => {
                    tracing::warn!(error = %e, "watch response cut short; resuming");
                    return None;
                }
                // As after a line codec's error: this response yields nothing more.
                Err(e) => return Some((Err(kube::Error::ReadEvents(e)), None)),
            }
            let text = match std::str::from_utf8(trim_end_of_line(&line)) {
                Ok(text) => text,
                Err(e) => {
                    let e = io::Error::new(io::ErrorKind::InvalidData, e);
                    return Some((Err(kube::Error::ReadEvents(e)), None));
                }
            };
            if let Some(event) = decode::watch_line(text) {
                return Some((event, Some((body, line))));
            }
        }
    })
}

/// The line without its `\n` (or `\r\n`), as a line codec gives it.
fn trim_end_of_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Whether a body error only means that the connection ended, as kube-rs's `request_events`
/// decides: an unexpected EOF anywhere in its chain (TLS stacks nest one; at most 16 sources
/// deep, so that a cyclic chain cannot stall the stream), or the chunked decoder's text saying
/// so.
fn ends_quietly(e: &io::Error) -> bool {
    if e.kind() == io::ErrorKind::UnexpectedEof
        || e.to_string().contains("unexpected EOF during chunk")
    {
        return true;
    }
    let mut source = e
        .get_ref()
        .map(|inner| inner as &(dyn std::error::Error + 'static));
    for _ in 0..16 {
        let Some(err) = source else {
            return false;
        };
        if err
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::UnexpectedEof)
        {
            return true;
        }
        source = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use futures::io::Cursor;
    use kube::Resource as _;

    use super::*;

    fn line(kind: &str, rv: &str) -> String {
        format!(
            r#"{{"type":"{kind}","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p","namespace":"ns","resourceVersion":"{rv}"}}}}}}"#
        )
    }

    #[tokio::test]
    async fn a_response_is_split_into_events_a_line_each() {
        // CRLF, an empty line, and an incomplete last line (skipped, as kube-rs skips it).
        let body = format!(
            "{}\r\n\n{}\n{}",
            line("ADDED", "1"),
            line("MODIFIED", "2"),
            &line("DELETED", "3")[..30]
        );
        let events: Vec<_> = events(Cursor::new(body.into_bytes())).collect().await;
        let got: Vec<(bool, Option<String>)> = events
            .into_iter()
            .map(|e| match e.expect("decoded") {
                WatchEvent::Added(o) => (true, o.meta().resource_version.clone()),
                WatchEvent::Modified(o) => (false, o.meta().resource_version.clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, [(true, Some("1".into())), (false, Some("2".into()))]);
    }

    #[tokio::test]
    async fn a_line_that_is_not_utf8_ends_the_response_with_an_error() {
        let mut body = line("ADDED", "1").into_bytes();
        body.extend_from_slice(b"\n{\"type\":\"\xff\"}\n");
        body.extend_from_slice(line("ADDED", "2").as_bytes());
        let events: Vec<_> = events(Cursor::new(body)).collect().await;
        assert_eq!(
            events.len(),
            2,
            "the event before, then the error, then nothing"
        );
        assert!(events[0].is_ok());
        assert!(
            matches!(&events[1], Err(kube::Error::ReadEvents(e)) if e.kind() == io::ErrorKind::InvalidData)
        );
    }

    #[test]
    fn a_line_loses_its_line_end_only() {
        assert_eq!(trim_end_of_line(b"{}\r\n"), b"{}");
        assert_eq!(trim_end_of_line(b"{}\n"), b"{}");
        assert_eq!(trim_end_of_line(b"{}"), b"{}");
        assert_eq!(trim_end_of_line(b"{\"a\":\"\\r\"}\n"), b"{\"a\":\"\\r\"}");
    }

    #[test]
    fn an_eof_nested_in_a_body_error_ends_the_response_quietly() {
        let nested = io::Error::other(io::Error::new(io::ErrorKind::UnexpectedEof, "tls"));
        assert!(ends_quietly(&nested));
        assert!(ends_quietly(&io::Error::other(
            "unexpected EOF during chunk size line"
        )));
        assert!(!ends_quietly(&io::Error::other("connection reset")));
    }
}
