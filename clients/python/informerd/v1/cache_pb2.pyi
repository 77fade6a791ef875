from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Predicate(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREDICATE_UNSPECIFIED: _ClassVar[Predicate]
    GENERATION_CHANGED: _ClassVar[Predicate]
    LABELS_CHANGED: _ClassVar[Predicate]
    ANNOTATIONS_CHANGED: _ClassVar[Predicate]

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_TYPE_UNSPECIFIED: _ClassVar[EventType]
    ADDED: _ClassVar[EventType]
    MODIFIED: _ClassVar[EventType]
    DELETED: _ClassVar[EventType]
    BOOKMARK: _ClassVar[EventType]
    SYNCED: _ClassVar[EventType]

class OwnerMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OWNER_MODE_UNSPECIFIED: _ClassVar[OwnerMode]
    OWNER_ONLY: _ClassVar[OwnerMode]
    OWNER_AND_SELF: _ClassVar[OwnerMode]

class KeyEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_EVENT_TYPE_UNSPECIFIED: _ClassVar[KeyEventType]
    KEY: _ClassVar[KeyEventType]
    RESYNC_START: _ClassVar[KeyEventType]
    RESYNC_END: _ClassVar[KeyEventType]
    PROGRESS: _ClassVar[KeyEventType]

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    Expired: _ClassVar[Reason]
    EpochChanged: _ClassVar[Reason]
    FellBehind: _ClassVar[Reason]
    NotSynced: _ClassVar[Reason]
    NotFound: _ClassVar[Reason]
    NotCaughtUp: _ClassVar[Reason]
    Invalid: _ClassVar[Reason]
    ShuttingDown: _ClassVar[Reason]
    Unauthenticated: _ClassVar[Reason]
    Forbidden: _ClassVar[Reason]
    TooManyWatchers: _ClassVar[Reason]
    TooManyLists: _ClassVar[Reason]
    OverMemoryLimit: _ClassVar[Reason]
    RequestTooLarge: _ClassVar[Reason]
PREDICATE_UNSPECIFIED: Predicate
GENERATION_CHANGED: Predicate
LABELS_CHANGED: Predicate
ANNOTATIONS_CHANGED: Predicate
EVENT_TYPE_UNSPECIFIED: EventType
ADDED: EventType
MODIFIED: EventType
DELETED: EventType
BOOKMARK: EventType
SYNCED: EventType
OWNER_MODE_UNSPECIFIED: OwnerMode
OWNER_ONLY: OwnerMode
OWNER_AND_SELF: OwnerMode
KEY_EVENT_TYPE_UNSPECIFIED: KeyEventType
KEY: KeyEventType
RESYNC_START: KeyEventType
RESYNC_END: KeyEventType
PROGRESS: KeyEventType
REASON_UNSPECIFIED: Reason
Expired: Reason
EpochChanged: Reason
FellBehind: Reason
NotSynced: Reason
NotFound: Reason
NotCaughtUp: Reason
Invalid: Reason
ShuttingDown: Reason
Unauthenticated: Reason
Forbidden: Reason
TooManyWatchers: Reason
TooManyLists: Reason
OverMemoryLimit: Reason
RequestTooLarge: Reason

class Object(_message.Message):
    __slots__ = ("namespace", "name", "uid", "resource_version", "labels", "revision", "json")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: _containers.ScalarMap[str, str]
    revision: int
    json: bytes
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., resource_version: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., revision: _Optional[int] = ..., json: _Optional[bytes] = ...) -> None: ...

class IndexLookup(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("resource", "namespace", "name", "min_resource_version", "fields", "wait_for_sync", "omit_labels", "cluster")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_SYNC_FIELD_NUMBER: _ClassVar[int]
    OMIT_LABELS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    name: str
    min_resource_version: str
    fields: _containers.RepeatedScalarFieldContainer[str]
    wait_for_sync: bool
    omit_labels: bool
    cluster: str
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., min_resource_version: _Optional[str] = ..., fields: _Optional[_Iterable[str]] = ..., wait_for_sync: bool = ..., omit_labels: bool = ..., cluster: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("object", "epoch", "revision")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    object: Object
    epoch: int
    revision: int
    def __init__(self, object: _Optional[_Union[Object, _Mapping]] = ..., epoch: _Optional[int] = ..., revision: _Optional[int] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("resource", "namespace", "label_selector", "field_selector", "index", "fields", "wait_for_sync", "chunk_size", "min_resource_version", "limit", "shard_selector", "omit_labels", "cluster")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_SYNC_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    MIN_RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SHARD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    OMIT_LABELS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    label_selector: str
    field_selector: str
    index: IndexLookup
    fields: _containers.RepeatedScalarFieldContainer[str]
    wait_for_sync: bool
    chunk_size: int
    min_resource_version: str
    limit: int
    shard_selector: str
    omit_labels: bool
    cluster: str
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ..., index: _Optional[_Union[IndexLookup, _Mapping]] = ..., fields: _Optional[_Iterable[str]] = ..., wait_for_sync: bool = ..., chunk_size: _Optional[int] = ..., min_resource_version: _Optional[str] = ..., limit: _Optional[int] = ..., shard_selector: _Optional[str] = ..., omit_labels: bool = ..., cluster: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("objects", "last", "epoch", "revision", "synced")
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    objects: _containers.RepeatedCompositeFieldContainer[Object]
    last: bool
    epoch: int
    revision: int
    synced: bool
    def __init__(self, objects: _Optional[_Iterable[_Union[Object, _Mapping]]] = ..., last: bool = ..., epoch: _Optional[int] = ..., revision: _Optional[int] = ..., synced: bool = ...) -> None: ...

class ResumeToken(_message.Message):
    __slots__ = ("epoch", "revision")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    revision: int
    def __init__(self, epoch: _Optional[int] = ..., revision: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("resource", "namespace", "label_selector", "field_selector", "index", "fields", "since", "send_initial_state", "held", "predicates", "predicate_cel", "bookmark_interval_seconds", "wait_for_sync", "send_previous", "shard_selector", "omit_labels", "cluster")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    SEND_INITIAL_STATE_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_CEL_FIELD_NUMBER: _ClassVar[int]
    BOOKMARK_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_SYNC_FIELD_NUMBER: _ClassVar[int]
    SEND_PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    SHARD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    OMIT_LABELS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    label_selector: str
    field_selector: str
    index: IndexLookup
    fields: _containers.RepeatedScalarFieldContainer[str]
    since: ResumeToken
    send_initial_state: bool
    held: HeldObjects
    predicates: _containers.RepeatedScalarFieldContainer[Predicate]
    predicate_cel: str
    bookmark_interval_seconds: int
    wait_for_sync: bool
    send_previous: bool
    shard_selector: str
    omit_labels: bool
    cluster: str
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ..., index: _Optional[_Union[IndexLookup, _Mapping]] = ..., fields: _Optional[_Iterable[str]] = ..., since: _Optional[_Union[ResumeToken, _Mapping]] = ..., send_initial_state: bool = ..., held: _Optional[_Union[HeldObjects, _Mapping]] = ..., predicates: _Optional[_Iterable[_Union[Predicate, str]]] = ..., predicate_cel: _Optional[str] = ..., bookmark_interval_seconds: _Optional[int] = ..., wait_for_sync: bool = ..., send_previous: bool = ..., shard_selector: _Optional[str] = ..., omit_labels: bool = ..., cluster: _Optional[str] = ...) -> None: ...

class HeldObjects(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: bytes
    def __init__(self, entries: _Optional[bytes] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("type", "epoch", "revision", "object", "previous", "gone")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    type: EventType
    epoch: int
    revision: int
    object: Object
    previous: Object
    gone: bytes
    def __init__(self, type: _Optional[_Union[EventType, str]] = ..., epoch: _Optional[int] = ..., revision: _Optional[int] = ..., object: _Optional[_Union[Object, _Mapping]] = ..., previous: _Optional[_Union[Object, _Mapping]] = ..., gone: _Optional[bytes] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("resource", "cluster")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    resource: str
    cluster: str
    def __init__(self, resource: _Optional[str] = ..., cluster: _Optional[str] = ...) -> None: ...

class ScopeStatus(_message.Message):
    __slots__ = ("scope", "state", "listed", "changes", "filter_errors", "relists", "last_error")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LISTED_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    FILTER_ERRORS_FIELD_NUMBER: _ClassVar[int]
    RELISTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    scope: str
    state: str
    listed: int
    changes: int
    filter_errors: int
    relists: int
    last_error: str
    def __init__(self, scope: _Optional[str] = ..., state: _Optional[str] = ..., listed: _Optional[int] = ..., changes: _Optional[int] = ..., filter_errors: _Optional[int] = ..., relists: _Optional[int] = ..., last_error: _Optional[str] = ...) -> None: ...

class IndexStatus(_message.Message):
    __slots__ = ("name", "indexes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    name: str
    indexes: str
    def __init__(self, name: _Optional[str] = ..., indexes: _Optional[str] = ...) -> None: ...

class ResourceStatus(_message.Message):
    __slots__ = ("name", "api_version", "kind", "namespaced", "synced", "epoch", "revision", "objects", "encoded_bytes", "interned_bytes", "log_entries", "log_bytes", "watchers", "dropped_watches", "scopes", "indexes", "cluster")
    NAME_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACED_FIELD_NUMBER: _ClassVar[int]
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    ENCODED_BYTES_FIELD_NUMBER: _ClassVar[int]
    INTERNED_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    WATCHERS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_WATCHES_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    name: str
    api_version: str
    kind: str
    namespaced: bool
    synced: bool
    epoch: int
    revision: int
    objects: int
    encoded_bytes: int
    interned_bytes: int
    log_entries: int
    log_bytes: int
    watchers: int
    dropped_watches: int
    scopes: _containers.RepeatedCompositeFieldContainer[ScopeStatus]
    indexes: _containers.RepeatedCompositeFieldContainer[IndexStatus]
    cluster: str
    def __init__(self, name: _Optional[str] = ..., api_version: _Optional[str] = ..., kind: _Optional[str] = ..., namespaced: bool = ..., synced: bool = ..., epoch: _Optional[int] = ..., revision: _Optional[int] = ..., objects: _Optional[int] = ..., encoded_bytes: _Optional[int] = ..., interned_bytes: _Optional[int] = ..., log_entries: _Optional[int] = ..., log_bytes: _Optional[int] = ..., watchers: _Optional[int] = ..., dropped_watches: _Optional[int] = ..., scopes: _Optional[_Iterable[_Union[ScopeStatus, _Mapping]]] = ..., indexes: _Optional[_Iterable[_Union[IndexStatus, _Mapping]]] = ..., cluster: _Optional[str] = ...) -> None: ...

class ClusterStatus(_message.Message):
    __slots__ = ("name", "reachable", "message", "since_seconds")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SINCE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    reachable: bool
    message: str
    since_seconds: int
    def __init__(self, name: _Optional[str] = ..., reachable: bool = ..., message: _Optional[str] = ..., since_seconds: _Optional[int] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("version", "synced", "resources", "allocated_bytes", "resident_bytes", "on_demand", "on_demand_stops", "clusters")
    class OnDemandStopsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESIDENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    ON_DEMAND_FIELD_NUMBER: _ClassVar[int]
    ON_DEMAND_STOPS_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    version: str
    synced: bool
    resources: _containers.RepeatedCompositeFieldContainer[ResourceStatus]
    allocated_bytes: int
    resident_bytes: int
    on_demand: _containers.RepeatedCompositeFieldContainer[OnDemandStatus]
    on_demand_stops: _containers.ScalarMap[str, int]
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterStatus]
    def __init__(self, version: _Optional[str] = ..., synced: bool = ..., resources: _Optional[_Iterable[_Union[ResourceStatus, _Mapping]]] = ..., allocated_bytes: _Optional[int] = ..., resident_bytes: _Optional[int] = ..., on_demand: _Optional[_Iterable[_Union[OnDemandStatus, _Mapping]]] = ..., on_demand_stops: _Optional[_Mapping[str, int]] = ..., clusters: _Optional[_Iterable[_Union[ClusterStatus, _Mapping]]] = ...) -> None: ...

class EnsureRequest(_message.Message):
    __slots__ = ("api_version", "kind", "resource", "namespaces", "cluster")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    resource: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    cluster: str
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., resource: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., cluster: _Optional[str] = ...) -> None: ...

class EnsureResponse(_message.Message):
    __slots__ = ("resource", "started")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    resource: str
    started: bool
    def __init__(self, resource: _Optional[str] = ..., started: bool = ...) -> None: ...

class OnDemandStatus(_message.Message):
    __slots__ = ("resource", "api_version", "kind", "namespaces", "clients", "idle_seconds", "objects", "synced", "cluster")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    CLIENTS_FIELD_NUMBER: _ClassVar[int]
    IDLE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    resource: str
    api_version: str
    kind: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    clients: int
    idle_seconds: float
    objects: int
    synced: bool
    cluster: str
    def __init__(self, resource: _Optional[str] = ..., api_version: _Optional[str] = ..., kind: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., clients: _Optional[int] = ..., idle_seconds: _Optional[float] = ..., objects: _Optional[int] = ..., synced: bool = ..., cluster: _Optional[str] = ...) -> None: ...

class WatchKeysRequest(_message.Message):
    __slots__ = ("subscribe", "ack")
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    subscribe: KeysSubscription
    ack: KeyAcks
    def __init__(self, subscribe: _Optional[_Union[KeysSubscription, _Mapping]] = ..., ack: _Optional[_Union[KeyAcks, _Mapping]] = ...) -> None: ...

class KeysSubscription(_message.Message):
    __slots__ = ("resource", "namespace", "label_selector", "field_selector", "index", "predicates", "predicate_cel", "since", "debounce_millis", "max_delay_millis", "owner", "wait_for_sync", "send_objects", "fields", "omit_labels", "cluster")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PREDICATES_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_CEL_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    DEBOUNCE_MILLIS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_MILLIS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    WAIT_FOR_SYNC_FIELD_NUMBER: _ClassVar[int]
    SEND_OBJECTS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    OMIT_LABELS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    label_selector: str
    field_selector: str
    index: IndexLookup
    predicates: _containers.RepeatedScalarFieldContainer[Predicate]
    predicate_cel: str
    since: ResumeToken
    debounce_millis: int
    max_delay_millis: int
    owner: OwnerMapping
    wait_for_sync: bool
    send_objects: bool
    fields: _containers.RepeatedScalarFieldContainer[str]
    omit_labels: bool
    cluster: str
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ..., index: _Optional[_Union[IndexLookup, _Mapping]] = ..., predicates: _Optional[_Iterable[_Union[Predicate, str]]] = ..., predicate_cel: _Optional[str] = ..., since: _Optional[_Union[ResumeToken, _Mapping]] = ..., debounce_millis: _Optional[int] = ..., max_delay_millis: _Optional[int] = ..., owner: _Optional[_Union[OwnerMapping, _Mapping]] = ..., wait_for_sync: bool = ..., send_objects: bool = ..., fields: _Optional[_Iterable[str]] = ..., omit_labels: bool = ..., cluster: _Optional[str] = ...) -> None: ...

class OwnerMapping(_message.Message):
    __slots__ = ("kind", "api_version", "mode")
    KIND_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    api_version: str
    mode: OwnerMode
    def __init__(self, kind: _Optional[str] = ..., api_version: _Optional[str] = ..., mode: _Optional[_Union[OwnerMode, str]] = ...) -> None: ...

class Key(_message.Message):
    __slots__ = ("kind", "namespace", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: str
    namespace: str
    name: str
    def __init__(self, kind: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class KeyAck(_message.Message):
    __slots__ = ("key", "revision")
    KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    key: Key
    revision: int
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., revision: _Optional[int] = ...) -> None: ...

class KeyAcks(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[KeyAck]
    def __init__(self, acks: _Optional[_Iterable[_Union[KeyAck, _Mapping]]] = ...) -> None: ...

class KeyEvent(_message.Message):
    __slots__ = ("type", "key", "revision", "deleted", "token", "pending", "in_flight", "queue_bytes", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: KeyEventType
    key: Key
    revision: int
    deleted: bool
    token: ResumeToken
    pending: int
    in_flight: int
    queue_bytes: int
    object: Object
    def __init__(self, type: _Optional[_Union[KeyEventType, str]] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., revision: _Optional[int] = ..., deleted: bool = ..., token: _Optional[_Union[ResumeToken, _Mapping]] = ..., pending: _Optional[int] = ..., in_flight: _Optional[int] = ..., queue_bytes: _Optional[int] = ..., object: _Optional[_Union[Object, _Mapping]] = ...) -> None: ...
