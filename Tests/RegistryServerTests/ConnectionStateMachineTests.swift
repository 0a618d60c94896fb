import RegistryWire
import Testing
@testable import RegistryServer

@Suite struct ConnectionStateMachineTests {
    let hello = ClientFrame(requestID: 0, body: .hello(Hello(role: .client, clientName: "t")))
    let stats = ClientFrame(requestID: 1, body: .stats)

    func code(_ action: ConnectionStateMachine.FrameAction) -> ErrorCode? {
        if case .failConnection(let error) = action { return error.code }
        return nil
    }

    @Test func helloThenRequests() {
        var machine = ConnectionStateMachine(maxInFlight: 4)
        #expect(machine.frameReceived(hello, nowSeconds: 0, certified: false) == .acceptHello)
        #expect(machine.frameReceived(stats, nowSeconds: 0, certified: false) == .dispatch)
        #expect(machine.inFlight == 1)
    }

    @Test func aRequestBeforeHelloFailsTheConnection() {
        var machine = ConnectionStateMachine(maxInFlight: 4)
        #expect(code(machine.frameReceived(stats, nowSeconds: 0, certified: false)) == .handshakeRequired)
        #expect(machine.state == .closed)
        #expect(machine.frameReceived(hello, nowSeconds: 0, certified: false) == .ignore)
    }

    @Test func wrongVersionsAndRolesAreRefused() {
        for (version, role, expected) in [
            (ProtocolVersion(major: 2, minor: 0), Role.client, ErrorCode.unsupportedVersion),
            (ProtocolVersion(major: 0, minor: 9), Role.client, .unsupportedVersion),
            (ProtocolVersion(major: 1, minor: 0), Role.unknown(0), .unsupportedRole),
        ] {
            var machine = ConnectionStateMachine(maxInFlight: 4)
            let frame = ClientFrame(requestID: 3, body: .hello(Hello(version: version, role: role, clientName: "")))
            #expect(code(machine.frameReceived(frame, nowSeconds: 0, certified: false)) == expected)
        }
        // A peer's hello hands the connection to the peer protocol.
        var peer = ConnectionStateMachine(maxInFlight: 4)
        #expect(peer.frameReceived(ClientFrame(requestID: 0, body: .hello(Hello(role: .peer, clientName: ""))), nowSeconds: 0, certified: false) == .acceptPeer)
        #expect(peer.state == .closed && !peer.takesFrames)
        var machine = ConnectionStateMachine(maxInFlight: 4)
        let newerMinor = ClientFrame(requestID: 0, body: .hello(Hello(version: ProtocolVersion(major: 1, minor: 9), role: .admin, clientName: "")))
        #expect(machine.frameReceived(newerMinor, nowSeconds: 0, certified: false) == .acceptHello)
        #expect(code(machine.frameReceived(hello, nowSeconds: 0, certified: false)) == .handshakeRequired)
    }

    @Test func framesAndReadsPauseAtTheInFlightLimitAndResumeWhenAnswered() {
        var machine = ConnectionStateMachine(maxInFlight: 2)
        _ = machine.frameReceived(hello, nowSeconds: 0, certified: false)
        #expect(machine.readRequested() == true)
        _ = machine.frameReceived(stats, nowSeconds: 0, certified: false)
        #expect(machine.takesFrames)
        _ = machine.frameReceived(stats, nowSeconds: 0, certified: false)
        #expect(!machine.takesFrames, "at the limit no further frame is cut from what was read")
        #expect(machine.readRequested() == false)
        #expect(machine.takeHeldRead() == false)
        #expect(machine.answered(1) == false)
        #expect(machine.takesFrames)
        #expect(machine.takeHeldRead() == true, "the held read goes ahead once a request may be taken")
        #expect(machine.takeHeldRead() == false, "and only once")
        #expect(machine.readRequested() == true)
    }

    @Test func anUnwritableChannelStopsFramesAndReadsUntilItDrains() {
        var machine = ConnectionStateMachine(maxInFlight: 100)
        _ = machine.frameReceived(hello, nowSeconds: 0, certified: false)
        _ = machine.frameReceived(stats, nowSeconds: 0, certified: false)
        #expect(machine.answered(1) == false)
        machine.writabilityChanged(writable: false)
        #expect(machine.inFlight == 0)
        #expect(!machine.takesFrames, "answers the socket has not taken hold back new requests")
        #expect(machine.readRequested() == false)
        #expect(machine.takeHeldRead() == false)
        machine.writabilityChanged(writable: true)
        #expect(machine.takesFrames)
        #expect(machine.takeHeldRead() == true)
    }

    @Test func drainingClosesOnceIdle() {
        var machine = ConnectionStateMachine(maxInFlight: 8)
        _ = machine.frameReceived(hello, nowSeconds: 0, certified: false)
        _ = machine.frameReceived(stats, nowSeconds: 0, certified: false)
        #expect(machine.drain() == false)
        #expect(machine.frameReceived(stats, nowSeconds: 0, certified: false) == .ignore)
        #expect(!machine.takesFrames)
        #expect(machine.readRequested() == false)
        #expect(machine.answered(1) == true)
        #expect(machine.takeHeldRead() == false, "a draining connection reads no more")
        var idle = ConnectionStateMachine(maxInFlight: 8)
        #expect(idle.drain() == true)
    }
}

@Suite struct RequestFlowControlTests {
    @Test func admitsUpToTheLimitWhileWritable() {
        var flow = RequestFlowControl(maxInFlight: 3)
        for _ in 0..<3 {
            #expect(flow.admits)
            flow.took()
        }
        #expect(!flow.admits && flow.inFlight == 3)
        flow.answered(2)
        #expect(flow.admits)
        flow.writabilityChanged(writable: false)
        #expect(!flow.admits)
        flow.writabilityChanged(writable: true)
        #expect(flow.admits)
    }

    @Test func aHeldReadIsGivenBackOnceWhenAdmittingAgain() {
        var flow = RequestFlowControl(maxInFlight: 1)
        #expect(flow.takeHeldRead() == false, "nothing was held")
        flow.took()
        #expect(flow.readRequested() == false)
        #expect(flow.readHeld)
        #expect(flow.takeHeldRead() == false)
        flow.answered(1)
        #expect(flow.takeHeldRead() == true)
        #expect(!flow.readHeld)
        #expect(flow.takeHeldRead() == false)
        #expect(flow.readRequested(open: false) == false, "a closed gate holds reads even below the limit")
    }
}
