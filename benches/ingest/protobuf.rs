//! The protobuf passes of the ingest benchmark (issue 17): the same pods as the JSON passes,
//! recorded with `Accept: application/vnd.kubernetes.protobuf` (what client-go asks for
//! built-in kinds), decoded with `k8s-pb`'s prost types, so that the report can say whether
//! reading protobuf would be faster end to end than informerd's JSON path.
//!
//! The conversion to JSON is in `pod_json.rs`.
//!
//! Input, recorded once beside the JSON recording (`{ns}.pb`, then `complete-protobuf`):
//! - list bodies: each namespace's `PodList` as the apiserver returned it: the magic `k8s\0`,
//!   then a `runtime.Unknown` whose `raw` holds the `PodList`. The run fails if its pods are
//!   not the JSON recording's (names and resourceVersions, in order): then delete the
//!   recording directory to record both again.
//! - watch frames, built from the list items: per pod one ADDED frame, then one MODIFIED frame
//!   with the JSON MODIFIED line's resourceVersion and label. A frame is a 4-byte big-endian
//!   length, then a `meta.v1.WatchEvent` whose `object.raw` is the object as the apiserver
//!   embeds it: `k8s\0` + `runtime.Unknown` (kind and apiVersion in `typeMeta`) holding the
//!   `Pod` (the apiserver's embedded encoder writes the envelope: kubernetes/kubernetes#108071
//!   shows such a frame). Decision: built rather than recorded, as the JSON lines are, so that both formats
//!   carry the same events; the items are re-encoded by prost (same fields, field order may
//!   differ from Go's).
//!
//! Passes (each object handed over as the JSON passes hand theirs, through `feed`'s events):
//! - protobuf decode-only: envelope, `Unknown`, `PodList` or `WatchEvent` + `Pod`: the floor.
//! - protobuf + informerd: the decoded `Pod` converted into the JSON `Value` the controller
//!   profile keeps (metadata without managedFields, spec.nodeName, status.phase,
//!   status.conditions, status.podIP), then `Projected::from_value` marked as transformed (the
//!   conversion is the transform; informerd's own JSON path applies it while decoding) and
//!   handed to `ScopeIngest::handle`, the fleet's public entry point, as the JSON pass does.

use std::{hint::black_box, path::Path, time::Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use informerd::{
    config::Config,
    fleet::{Pipeline, Projected},
};
use informerd_testkit::ControlPlane;
use k8s_pb::{
    api::core::v1::{Pod, PodList},
    apimachinery::pkg::{
        apis::meta::v1::WatchEvent,
        runtime::{RawExtension, TypeMeta, Unknown},
    },
};
use kube::{api::ListParams, client::Body, runtime::watcher};
use prost::Message;
use serde_json::Value;

use super::{
    changes, check_informerd, informerd_pass, pod_json::controller_value, round, scopes, Bodies,
    Input, Profile, Report, SEQ_LABEL,
};

const MAGIC: &[u8] = b"k8s\0";
const MARKER: &str = "complete-protobuf";
pub const FLOOR: &str = "protobuf decode-only floor (k8s-pb)";
pub const INFORMERD: &str = "protobuf + informerd, controller profile";

/// The protobuf bodies of the pods in [`Bodies`].
#[derive(Default)]
pub struct PbBodies {
    /// Per namespace: its `PodList` body.
    lists: Vec<Vec<u8>>,
    /// Per namespace: the ADDED frames, then the MODIFIED frames, each a stream of frames.
    added: Vec<Vec<u8>>,
    modified: Vec<Vec<u8>>,
}

impl PbBodies {
    pub fn bytes(&self, input: Input) -> usize {
        match input {
            Input::Watch => self.added.iter().chain(&self.modified).map(Vec::len).sum(),
            Input::List => self.lists.iter().map(Vec::len).sum(),
        }
    }
}

/// The protobuf list bodies of `bodies`' namespaces, from `dir` or from the control plane
/// (then cached in `dir`), with the frames built from them.
pub fn load(dir: &Path, bodies: &Bodies) -> Result<PbBodies> {
    let lists = if dir.join(MARKER).exists() {
        let read = |ns: &String| {
            let path = dir.join(format!("{ns}.pb"));
            std::fs::read(&path).with_context(|| format!("{}", path.display()))
        };
        bodies.namespaces.iter().map(read).collect::<Result<_>>()?
    } else {
        let lists = record(bodies)?;
        for (ns, body) in bodies.namespaces.iter().zip(&lists) {
            std::fs::write(dir.join(format!("{ns}.pb")), body)?;
        }
        std::fs::write(dir.join(MARKER), "")?;
        eprintln!("input: protobuf PodLists recorded into {}", dir.display());
        lists
    };
    build(bodies, lists)
}

/// Each namespace's first page of as many pods as the JSON recording holds of it.
fn record(bodies: &Bodies) -> Result<Vec<Vec<u8>>> {
    let cp = ControlPlane::get();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = rt.block_on(cp.client())?;
    rt.block_on(async {
        let mut lists = Vec::new();
        for (ns, added) in bodies.namespaces.iter().zip(&bodies.added) {
            let lp = ListParams::default().limit(added.len() as u32);
            let mut request = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/pods"))
                .list(&lp)
                .map_err(|e| anyhow!("list request: {e}"))?;
            request.headers_mut().insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static("application/vnd.kubernetes.protobuf"),
            );
            let response = client.send(request.map(Body::from)).await?;
            ensure!(
                response.status().is_success(),
                "protobuf list of {ns}: {}",
                response.status()
            );
            lists.push(response.into_body().collect_bytes().await?.to_vec());
        }
        Ok(lists)
    })
}

fn envelope(type_meta: TypeMeta, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(type_meta),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    unknown.encode(&mut out).expect("a Vec grows");
    out
}

/// The `raw` of an envelope (`k8s\0` + `runtime.Unknown`).
fn open(bytes: &[u8]) -> Result<Vec<u8>> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .context("a protobuf body without the k8s\\0 magic")?;
    Unknown::decode(rest)?
        .raw
        .context("a runtime.Unknown without raw")
}

fn frame(out: &mut Vec<u8>, kind: &str, pod: &Pod) {
    let type_meta = TypeMeta {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
    };
    let event = WatchEvent {
        r#type: Some(kind.into()),
        object: Some(RawExtension {
            raw: Some(envelope(type_meta, pod.encode_to_vec())),
        }),
    };
    out.extend_from_slice(&(event.encoded_len() as u32).to_be_bytes());
    event.encode(out).expect("a Vec grows");
}

fn build(bodies: &Bodies, lists: Vec<Vec<u8>>) -> Result<PbBodies> {
    let mut pb = PbBodies::default();
    for (ns, body) in lists.into_iter().enumerate() {
        let list = PodList::decode(open(&body)?.as_slice())?;
        let (mut added, mut modified) = (Vec::new(), Vec::new());
        ensure!(
            list.items.len() == bodies.added[ns].len(),
            "the protobuf recording of {} has {} pods, the JSON one {}: delete the recording \
             directory to record both again",
            bodies.namespaces[ns],
            list.items.len(),
            bodies.added[ns].len()
        );
        for (i, mut pod) in list.items.into_iter().enumerate() {
            let json: Value = serde_json::from_str(&bodies.modified[ns][i])?;
            let meta = pod.metadata.clone().unwrap_or_default();
            let added_json: Value = serde_json::from_str(&bodies.added[ns][i])?;
            let same = |field: &str, pb: &Option<String>| {
                added_json["object"]["metadata"][field].as_str() == pb.as_deref()
            };
            ensure!(
                same("name", &meta.name) && same("resourceVersion", &meta.resource_version),
                "the protobuf recording of {} is not the JSON one's pods (pod {i}): delete the \
                 recording directory to record both again",
                bodies.namespaces[ns]
            );
            frame(&mut added, "ADDED", &pod);
            let rv = json["object"]["metadata"]["resourceVersion"]
                .as_str()
                .context("a MODIFIED line without resourceVersion")?;
            let meta = pod.metadata.get_or_insert_default();
            meta.resource_version = Some(rv.to_string());
            meta.labels.insert(SEQ_LABEL.into(), rv.to_string());
            frame(&mut modified, "MODIFIED", &pod);
        }
        pb.lists.push(body);
        pb.added.push(added);
        pb.modified.push(modified);
    }
    Ok(pb)
}

/// The frames of a stream, each without its length.
fn frames(mut stream: &[u8]) -> impl Iterator<Item = Result<&[u8]>> {
    std::iter::from_fn(move || {
        if stream.is_empty() {
            return None;
        }
        let Some((len, rest)) = stream.split_first_chunk::<4>() else {
            return Some(Err(anyhow!("a frame cut short")));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if rest.len() < len {
            return Some(Err(anyhow!("a frame cut short")));
        }
        let (frame, rest) = rest.split_at(len);
        stream = rest;
        Some(Ok(frame))
    })
}

/// The pod of a frame that must be an `expected` event.
fn decode_event(frame: &[u8], expected: &str) -> Result<Pod> {
    let event = WatchEvent::decode(black_box(frame))?;
    ensure!(
        event.r#type.as_deref() == Some(expected),
        "a {expected} frame decoded as {:?}",
        event.r#type
    );
    let raw = event
        .object
        .and_then(|o| o.raw)
        .context("an event without object")?;
    Ok(Pod::decode(open(&raw)?.as_slice())?)
}

/// As the JSON passes' `feed`: the watch input as `Init`, an `InitApply` per ADDED frame,
/// `InitDone`, then an `Apply` per MODIFIED frame; the list input as `Init`, an `InitApply`
/// per item, `InitDone`. Returns the objects handed over.
fn feed<T>(
    pb: &PbBodies,
    input: Input,
    convert: impl Fn(Pod) -> T,
    mut handle: impl FnMut(usize, watcher::Event<T>),
) -> Result<usize> {
    let mut events = 0;
    match input {
        Input::Watch => {
            for (ns, stream) in pb.added.iter().enumerate() {
                handle(ns, watcher::Event::Init);
                for frame in frames(stream) {
                    let pod = decode_event(frame?, "ADDED")?;
                    handle(ns, watcher::Event::InitApply(convert(pod)));
                    events += 1;
                }
                handle(ns, watcher::Event::InitDone);
            }
            for (ns, stream) in pb.modified.iter().enumerate() {
                for frame in frames(stream) {
                    let pod = decode_event(frame?, "MODIFIED")?;
                    handle(ns, watcher::Event::Apply(convert(pod)));
                    events += 1;
                }
            }
        }
        Input::List => {
            for (ns, body) in pb.lists.iter().enumerate() {
                let list = PodList::decode(open(black_box(body))?.as_slice())?;
                handle(ns, watcher::Event::Init);
                for pod in list.items {
                    handle(ns, watcher::Event::InitApply(convert(pod)));
                    events += 1;
                }
                handle(ns, watcher::Event::InitDone);
            }
        }
    }
    Ok(events)
}

/// The protobuf passes, as variants of the benchmark's `Pass`.
pub enum PbPass<'a> {
    Floor,
    Informerd { config: &'a Config },
}

impl PbPass<'_> {
    pub fn label(&self) -> &'static str {
        match self {
            PbPass::Floor => FLOOR,
            PbPass::Informerd { .. } => INFORMERD,
        }
    }

    /// Runs the pass once; returns the events it handled and its time in seconds.
    pub fn run(&self, bodies: &Bodies, input: Input) -> Result<(usize, f64)> {
        match self {
            PbPass::Floor => {
                let start = Instant::now();
                let events = feed(&bodies.pb, input, |p| p, |_, e| drop(black_box(e)))?;
                let secs = start.elapsed().as_secs_f64();
                let expected = match input {
                    Input::Watch => 2 * bodies.pods,
                    Input::List => bodies.pods,
                };
                ensure!(
                    events == expected,
                    "protobuf floor: {events} pods, {expected} expected"
                );
                Ok((events, secs))
            }
            PbPass::Informerd { config } => {
                let pipeline = Pipeline::new(&config.change_log, &config.resources[0]);
                let start = Instant::now();
                let (events, changes) = pb_informerd(bodies, input, &pipeline)?;
                let secs = start.elapsed().as_secs_f64();
                check_informerd(bodies, input, Profile::Controller, &pipeline.store, changes)?;
                Ok((events, secs))
            }
        }
    }
}

/// Returns events and changes made, as `informerd_pass`.
fn pb_informerd(bodies: &Bodies, input: Input, pipeline: &Pipeline) -> Result<(usize, u64)> {
    let mut scopes = scopes(bodies, pipeline);
    let projected = |pod: Pod| {
        let mut p = Projected::from_value(controller_value(pod));
        p.transformed = true;
        p
    };
    let events = feed(&bodies.pb, input, projected, |ns, event| {
        black_box(scopes[ns].handle(event));
    })?;
    Ok((events, changes(&scopes, INFORMERD)?))
}

/// Once, before the timed passes: the protobuf path must store exactly what informerd's JSON
/// path stores (controller profile), every object, on both inputs.
pub fn verify(bodies: &Bodies, config: &Config) -> Result<()> {
    for input in [Input::Watch, Input::List] {
        let stores: Vec<_> = [false, true]
            .into_iter()
            .map(|protobuf| {
                let pipeline = Pipeline::new(&config.change_log, &config.resources[0]);
                if protobuf {
                    pb_informerd(bodies, input, &pipeline)?;
                } else {
                    informerd_pass(bodies, input, &pipeline)?;
                }
                Ok(pipeline.store)
            })
            .collect::<Result<_>>()?;
        let (_, json) = stores[0].list(None);
        let (_, pb) = stores[1].list(None);
        ensure!(
            json.len() == bodies.pods && pb.len() == bodies.pods,
            "{}: stores of {} (JSON) and {} (protobuf) objects, {} expected",
            input.label(),
            json.len(),
            pb.len(),
            bodies.pods
        );
        for (j, p) in json.iter().zip(&pb) {
            let (j, p) = (j.as_json(), p.as_json());
            if j != p {
                bail!(
                    "{}: protobuf stored\n{p}\nwhere JSON stored\n{j}",
                    input.label()
                );
            }
        }
    }
    eprintln!("protobuf: every object stored equal to the JSON path's, on both inputs");
    Ok(())
}

/// Protobuf + informerd's events/s ÷ (informerd's JSON path's, the kube-rs typed reflector's),
/// and the protobuf floor's ÷ the JSON floor's, on `input`.
pub fn ratios(report: &Report, input: Input) -> [f64; 3] {
    let eps = |pass: &str| report.row(input, pass).events_per_sec();
    let pb = eps(INFORMERD);
    [
        pb / eps("informerd, controller profile"),
        pb / report.kube(input).events_per_sec(),
        eps(FLOOR) / report.floor(input).events_per_sec(),
    ]
}

/// The report's conclusion on protobuf, one line per input.
pub fn conclusion(report: &Report) -> String {
    let mut out = String::new();
    for input in [Input::Watch, Input::List] {
        let [vs_json, vs_kube, floors] = ratios(report, input);
        out += &format!(
            "{}: protobuf end to end (k8s-pb decode, conversion, store) is {vs_json:.2}× \
             informerd's JSON path and {vs_kube:.2}× the kube-rs typed reflector; protobuf \
             decode-only is {floors:.2}× the JSON parse-only floor. {}\n",
            input.label(),
            if vs_json > 1.0 {
                "Reading protobuf is faster end to end here."
            } else {
                "Reading protobuf is not faster end to end here: JSON stays."
            }
        );
    }
    out
}

/// The conclusion's figures for `ingest.json`.
pub fn json(report: &Report) -> Value {
    let per_input = |input| {
        let [vs_json, vs_kube, floors] = ratios(report, input);
        serde_json::json!({
            "protobufTimesJsonInformerd": round(vs_json, 2),
            "protobufTimesKubeTyped": round(vs_kube, 2),
            "protobufFloorTimesJsonFloor": round(floors, 2),
        })
    };
    serde_json::json!({
        "what": "the same pods read as application/vnd.kubernetes.protobuf (k8s-pb), decoded only, and decoded, converted to the controller profile's JSON and stored through ScopeIngest",
        "watchFrames": "built from the recorded protobuf PodList items, as the JSON watch lines are",
        "watch": per_input(Input::Watch),
        "list": per_input(Input::List),
    })
}
