import RegistryWire

/// The network between simulated nodes: messages of one connection (a sender's incarnation of a
/// link) delivered at simulated times, with the faults a seed chooses. A message of a connection
/// that has since been replaced is dropped on arrival, as a closed TCP connection's would be.
struct SimulatedNetwork {
    /// Which way a message goes on a link from `sender` to `receiver`.
    enum Direction: Equatable {
        case toReceiver
        case toSender
    }

    struct Message {
        let sender: Int
        let receiver: Int
        let incarnation: Int
        let direction: Direction
        let frame: PeerFrame
        let deliverAt: UInt64
        /// Ties broken by sending order.
        let order: UInt64
    }

    /// The faults, as chances out of 1,000 per message, and the most extra delay.
    struct Faults {
        var drop = 0
        var duplicate = 0
        var maxExtraDelayMillis: UInt64 = 0

        static let none = Faults()
    }

    private(set) var queue: [Message] = []
    private var sent: UInt64 = 0
    var faults = Faults.none
    /// Directed pairs that cannot reach each other.
    var cut: Set<[Int]> = []
    /// Directed pairs whose messages take this many milliseconds more.
    var slow: [[Int]: UInt64] = [:]

    func reaches(_ from: Int, _ to: Int) -> Bool { !cut.contains([from, to]) }

    mutating func send(
        sender: Int, receiver: Int, incarnation: Int, direction: Direction, frame: PeerFrame, now: UInt64,
        random: inout some RandomNumberGenerator
    ) {
        let (from, to) = direction == .toReceiver ? (sender, receiver) : (receiver, sender)
        guard reaches(from, to) else { return }
        if faults.drop > 0, Int.random(in: 0..<1_000, using: &random) < faults.drop { return }
        let copies = faults.duplicate > 0 && Int.random(in: 0..<1_000, using: &random) < faults.duplicate ? 2 : 1
        for _ in 0..<copies {
            let delay = 1 + (slow[[from, to]] ?? 0) + (faults.maxExtraDelayMillis > 0 ? UInt64.random(in: 0...faults.maxExtraDelayMillis, using: &random) : 0)
            sent += 1
            queue.append(
                Message(
                    sender: sender, receiver: receiver, incarnation: incarnation, direction: direction, frame: frame, deliverAt: now + delay,
                    order: sent))
        }
    }

    /// The messages due by `now`, in delivery order, removed from the queue.
    mutating func due(by now: UInt64) -> [Message] {
        let ready = queue.filter { $0.deliverAt <= now }.sorted { ($0.deliverAt, $0.order) < ($1.deliverAt, $1.order) }
        queue.removeAll { $0.deliverAt <= now }
        return ready
    }

    var isEmpty: Bool { queue.isEmpty }

    /// Whether no message between two of `nodes` is in flight (a removed node that still runs
    /// keeps knocking, and is refused).
    func isEmpty(among nodes: Set<Int>) -> Bool {
        !queue.contains { nodes.contains($0.sender) && nodes.contains($0.receiver) }
    }
}
