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
        #expect(machine.frameReceived(hello) == .acceptHello)
        #expect(machine.frameReceived(stats) == .dispatch)
        #expect(machine.inFlight == 1)
    }

    @Test func aRequestBeforeHelloFailsTheConnection() {
        var machine = ConnectionStateMachine(maxInFlight: 4)
        #expect(code(machine.frameReceived(stats)) == .handshakeRequired)
        #expect(machine.state == .closed)
        #expect(machine.frameReceived(hello) == .ignore)
    }

    @Test func wrongVersionsAndRolesAreRefused() {
        for (version, role, expected) in [
            (ProtocolVersion(major: 2, minor: 0), Role.client, ErrorCode.unsupportedVersion),
            (ProtocolVersion(major: 0, minor: 9), Role.client, .unsupportedVersion),
            (ProtocolVersion(major: 1, minor: 9), Role.peer, .unsupportedRole),
            (ProtocolVersion(major: 1, minor: 0), Role.unknown(0), .unsupportedRole),
        ] {
            var machine = ConnectionStateMachine(maxInFlight: 4)
            let frame = ClientFrame(requestID: 3, body: .hello(Hello(version: version, role: role, clientName: "")))
            #expect(code(machine.frameReceived(frame)) == expected)
        }
        var machine = ConnectionStateMachine(maxInFlight: 4)
        let newerMinor = ClientFrame(requestID: 0, body: .hello(Hello(version: ProtocolVersion(major: 1, minor: 9), role: .admin, clientName: "")))
        #expect(machine.frameReceived(newerMinor) == .acceptHello)
        #expect(code(machine.frameReceived(hello)) == .handshakeRequired)
    }

    @Test func readsPauseAtTheInFlightLimitAndResumeWhenAnswered() {
        var machine = ConnectionStateMachine(maxInFlight: 2)
        _ = machine.frameReceived(hello)
        #expect(machine.readRequested() == .read)
        _ = machine.frameReceived(stats)
        _ = machine.frameReceived(stats)
        _ = machine.frameReceived(stats)  // a read may carry more than the limit; it is bounded by the read
        #expect(machine.readRequested() == .hold)
        #expect(machine.answered(1) == (resumeRead: false, close: false))
        #expect(machine.answered(1) == (resumeRead: true, close: false))
        #expect(machine.readRequested() == .read)
    }

    @Test func drainingClosesOnceIdle() {
        var machine = ConnectionStateMachine(maxInFlight: 8)
        _ = machine.frameReceived(hello)
        _ = machine.frameReceived(stats)
        #expect(machine.drain() == false)
        #expect(machine.frameReceived(stats) == .ignore)
        #expect(machine.readRequested() == .hold)
        #expect(machine.answered(1) == (resumeRead: false, close: true))
        var idle = ConnectionStateMachine(maxInFlight: 8)
        #expect(idle.drain() == true)
    }
}
