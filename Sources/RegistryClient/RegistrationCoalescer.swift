import RegistryWire

/// Packs the single registrations written to a connection between two flushes into one
/// RegisterBatch frame, and splits that frame's answer back into one answer per registration.
///
/// Each registration keeps its own outcome: the server answers a batch item by item, in order,
/// exactly as it would have answered the registrations one frame each. What changes is the cost:
/// one frame to encode, decode, hand over and answer instead of many. A plain value; the
/// connection handler carries out what it decides. `Sink` is whatever receives an answer.
struct RegistrationCoalescer<Sink> {
    /// Registrations larger than this, in approximate encoded bytes, are sent alone, so that a
    /// full frame stays far below the server's frame limit.
    static var largestCoalesced: Int { 2_048 }

    /// Registrations per frame at most; 1 or less sends every registration alone.
    private(set) var limit: Int
    private var held: [(request: RegisterRequest, sink: Sink)] = []

    /// - Parameter limit: registrations per frame at most, before the server's limits are known.
    init(limit: Int) {
        self.limit = limit
    }

    var isEmpty: Bool { held.isEmpty }

    /// Lowers the limit to what the server accepts (from its HelloAccepted): no more than its
    /// batch limit, and few enough of the largest coalesced registrations to fit half a frame.
    mutating func adopt(_ limits: Limits) {
        let fitting = Int(limits.maxFrameBytes) / 2 / Self.largestCoalesced
        limit = min(limit, Int(limits.maxBatchSize), fitting)
    }

    /// Whether `request` may wait to share a frame: coalescing is on, the request is small, and
    /// its texts hold no NUL, which the encoder refuses: such a request travels alone, to fail
    /// alone, not with the frame's other registrations.
    func accepts(_ request: RegisterRequest) -> Bool {
        limit > 1 && Self.approximateBytes(request) <= Self.largestCoalesced && !Self.holdsNUL(request)
    }

    static func holdsNUL(_ request: RegisterRequest) -> Bool {
        request.bundleID.utf8.contains(0) || request.identifiers.contains { $0.text.utf8.contains(0) }
    }

    /// Holds `request` for the next frame; true when the frame is full and should be written now.
    mutating func hold(_ request: RegisterRequest, answeringTo sink: Sink) -> Bool {
        held.append((request, sink))
        return held.count >= limit
    }

    /// Everything held, as the body to send and whom its answers go to, in order: a plain
    /// RegisterRequest when only one is held. Nil when nothing is.
    mutating func take() -> (body: ClientBody, sinks: [Sink])? {
        guard !held.isEmpty else { return nil }
        defer { held.removeAll(keepingCapacity: true) }
        if held.count == 1 { return (.register(held[0].request), [held[0].sink]) }
        return (.registerBatch(held.map(\.request)), held.map(\.sink))
    }

    /// The answer each of `count` coalesced registrations gets from the server's `answer` to
    /// their batch frame: its own item's result or error; the frame's error, when the server
    /// refused the whole frame; a failure when the answer does not fit the request.
    static func split(_ answer: ServerBody, count: Int) -> [Result<ServerBody, RegistryClientError>] {
        switch answer {
        case .registerBatchResult(let items) where items.count == count:
            return items.map { item in
                switch item {
                case .result(let result): return .success(.registerResult(result))
                case .error(let error): return .success(.error(error))
                }
            }
        case .registerBatchResult(let items):
            let problem = "\(items.count) batch items answered \(count) coalesced registrations"
            return Array(repeating: .failure(.unexpectedResponse(problem)), count: count)
        case .error(let error):
            return Array(repeating: .success(.error(error)), count: count)
        default:
            return Array(repeating: .failure(.unexpectedResponse("\(answer) to a RegisterBatchRequest")), count: count)
        }
    }

    /// An upper estimate of `request`'s encoded size: its strings plus a few bytes of tags and
    /// lengths for each field.
    static func approximateBytes(_ request: RegisterRequest) -> Int {
        request.identifiers.reduce(request.bundleID.utf8.count + 16) { $0 + $1.text.utf8.count + 16 }
    }
}
