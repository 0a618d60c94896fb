import RegistryCore
/// The wire types the client's API takes and returns (requests, answers, `Endpoint`,
/// `CausalToken`, `WireError`) come with `import RegistryClient`: a package that depends on the
/// `RegistryClient` product builds requests without importing `RegistryWire`, which is not a
/// product of this package.
@_exported import RegistryWire

/// The kinds of change a watch reports (`registry.v1.WatchEventKind`), with their names.
public typealias WatchEventKind = RegistryCore.FeedEventKind
