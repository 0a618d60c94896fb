import RegistryWire
import Testing
@testable import RegistryClient

@Suite("Coalescing single registrations into batch frames")
struct RegistrationCoalescerTests {
    func registration(_ index: Int, bundle: String = "com.vendor.app") -> RegisterRequest {
        let digits = String(index + 1)
        return RegisterRequest(
            bundleID: bundle, idfv: "00000000-0000-0000-0000-" + String(repeating: "0", count: 12 - digits.count) + digits)
    }

    func result(_ device: String) -> RegisterResult {
        RegisterResult(deviceID: device, created: true, vendor: "com.vendor")
    }

    @Test func theLimitIsTheSmallestOfTheClientsChoiceTheBatchLimitAndHalfAFrame() {
        var coalescer = RegistrationCoalescer<Int>(limit: 128)
        coalescer.adopt(Limits(maxFrameBytes: 1 << 20, maxBatchSize: 1000, maxInFlight: 1024))
        #expect(coalescer.limit == 128)
        coalescer.adopt(Limits(maxFrameBytes: 1 << 20, maxBatchSize: 50, maxInFlight: 1024))
        #expect(coalescer.limit == 50)
        // 64 KiB frames hold 16 of the largest coalesced registrations in their first half.
        coalescer.adopt(Limits(maxFrameBytes: 64 << 10, maxBatchSize: 1000, maxInFlight: 1024))
        #expect(coalescer.limit == 16)
    }

    @Test func offOrLargeRegistrationsTravelAlone() {
        #expect(RegistrationCoalescer<Int>(limit: 8).accepts(registration(0)))
        #expect(!RegistrationCoalescer<Int>(limit: 1).accepts(registration(0)))
        let huge = RegisterRequest(bundleID: "com.vendor." + String(repeating: "a", count: 3_000), idfv: "x")
        #expect(!RegistrationCoalescer<Int>(limit: 8).accepts(huge))
    }

    @Test func heldRegistrationsLeaveAsOneFrameInTheOrderWritten() throws {
        var coalescer = RegistrationCoalescer<Int>(limit: 3)
        let nothing = coalescer.take()
        #expect(nothing == nil)
        let full = [
            coalescer.hold(registration(0), answeringTo: 10), coalescer.hold(registration(1), answeringTo: 11),
            coalescer.hold(registration(2), answeringTo: 12),
        ]
        #expect(full == [false, false, true])  // the third fills the frame: write it now
        let taken = coalescer.take()
        let frame = try #require(taken)
        #expect(frame.body == .registerBatch([registration(0), registration(1), registration(2)]))
        #expect(frame.sinks == [10, 11, 12])
        #expect(coalescer.isEmpty)
        // One held registration is sent as the plain request it was.
        _ = coalescer.hold(registration(3), answeringTo: 13)
        let last = coalescer.take()
        let single = try #require(last)
        #expect(single.body == .register(registration(3)) && single.sinks == [13])
    }

    @Test func eachRegistrationGetsItsOwnItemOfTheBatchAnswer() {
        let refused = WireError(code: .invalidBundleID, message: "bad bundle")
        let answers = RegistrationCoalescer<Int>.split(.registerBatchResult([.result(result("a")), .error(refused), .result(result("a"))]), count: 3)
        #expect(answers == [.success(.registerResult(result("a"))), .success(.error(refused)), .success(.registerResult(result("a")))])
    }

    @Test func aRefusedFrameIsEveryRegistrationsErrorAndAMisfitAnswerFailsThemAll() {
        let unavailable = WireError(code: .unavailable, message: "storage failed", retryable: true)
        #expect(RegistrationCoalescer<Int>.split(.error(unavailable), count: 2) == [.success(.error(unavailable)), .success(.error(unavailable))])
        let short = RegistrationCoalescer<Int>.split(.registerBatchResult([.result(result("a"))]), count: 2)
        #expect(short.count == 2 && short.allSatisfy { if case .failure(.unexpectedResponse) = $0 { true } else { false } })
        let other = RegistrationCoalescer<Int>.split(.stats(StatsMessage()), count: 2)
        #expect(other.count == 2 && other.allSatisfy { if case .failure(.unexpectedResponse) = $0 { true } else { false } })
    }
}
