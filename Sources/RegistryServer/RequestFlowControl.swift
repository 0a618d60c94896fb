/// When a connection may take its next request off the wire: a plain value, shared by every
/// kind of connection that answers requests (a client's requests, a peer's batches and snapshot
/// chunks).
///
/// A connection holds at most `maxInFlight` requests that it has taken and not yet answered,
/// and takes none while its channel is not writable (answers written but not yet taken by the
/// socket are above the channel's high water mark). While it takes none it also reads nothing,
/// so the client's unread bytes stay in the kernel's socket buffers and TCP pushes back. What
/// one connection can hold in the node's memory is then bounded by: the bytes of one socket read
/// cycle waiting to be cut into frames, the answers of `maxInFlight` requests, and the write
/// buffer's high water mark.
struct RequestFlowControl: Equatable {
    let maxInFlight: Int
    /// Requests taken and not yet answered.
    private(set) var inFlight = 0
    /// False while the channel's outbound buffer is above its high water mark.
    private(set) var writable = true
    /// A read the channel asked for and was refused; owed once requests are taken again.
    private(set) var readHeld = false

    init(maxInFlight: Int) {
        precondition(maxInFlight >= 1, "a connection must be able to take one request")
        self.maxInFlight = maxInFlight
    }

    /// Whether the next whole frame may be taken now.
    var admits: Bool { inFlight < maxInFlight && writable }

    /// A request was taken.
    mutating func took() {
        inFlight += 1
    }

    /// `count` answers were handed to the channel.
    mutating func answered(_ count: Int) {
        precondition(count <= inFlight, "answered \(count) requests with \(inFlight) in flight")
        inFlight -= count
    }

    /// The channel's writability changed.
    mutating func writabilityChanged(writable: Bool) {
        self.writable = writable
    }

    /// The channel wants to read more: true to read, false to hold the read until
    /// ``takeHeldRead()`` gives it back. `open` is false once the connection takes no more
    /// requests at all (draining), which holds every read.
    mutating func readRequested(open: Bool = true) -> Bool {
        if open && admits { return true }
        readHeld = true
        return false
    }

    /// True, once, when a held read may now go ahead.
    mutating func takeHeldRead() -> Bool {
        guard readHeld, admits else { return false }
        readHeld = false
        return true
    }
}
