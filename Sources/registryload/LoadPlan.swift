import RegistryClient
import LoadGeneration

/// Everything one run needs, validated from the command line.
struct LoadPlan: Sendable {
    var endpoints: [Endpoint]
    var connections: Int
    var inFlight: Int
    var batch: Int
    /// Single registrations the client library may send as one frame (its `maxCoalesced`).
    var coalesce: Int
    /// Registrations per second in open loop; nil for closed loop.
    var rate: Double?
    var duration: DurationText?
    var requests: UInt64?
    var warmup: DurationText
    var seed: UInt64
    var mix: WorkloadMix
    var catalogue: LoadCatalogue
    var threads: Int
    var verify: Bool
    var verifyWait: DurationText
    /// How long a connection may have requests outstanding and no answer before the run gives
    /// it up as lost; zero waits for ever.
    var answerTimeout: DurationText
    var objectives: [ServiceLevelObjective]
    /// The write concern of every registration; nil leaves it to the nodes.
    var ackReplicas: UInt32? = nil
    /// The token every connection presents (`--token-file` or `$REGISTRY_TOKEN`).
    var token: String? = nil
    /// Connect with TLS trusting this CA file (`--tls-ca`); nil: plain TCP.
    var tlsCA: String? = nil
    /// Keep each device's causal token and send it with the device's next registration.
    var causalTokens = true
    /// Watch streams to run during the load (`--watchers`).
    var watchers = 0

    var mode: String { rate == nil ? "closed-loop" : "open-loop" }

    var parameters: LoadReport.Parameters {
        LoadReport.Parameters(
            endpoints: endpoints.map(\.description), connections: connections, inFlight: inFlight, batch: batch, coalesce: coalesce, mode: mode,
            rate: rate, durationSeconds: duration?.seconds, requests: requests, warmupSeconds: warmup.seconds, seed: seed,
            workload: mix.description, vendors: catalogue.vendors, appsPerVendor: catalogue.appsPerVendor, threads: threads,
            verify: verify, objectives: objectives.map(\.description))
    }
}
