// How long a vendor move holds a node's state: the time to apply one rule change whose move joins
// vendor com.a (half of N devices, two claims each, and a binding change for one device in ten)
// to com.b (the other half; one com.b device in ten shares its IDFV with a com.a device, so those
// merge). The state is held for all of it: it is the pause every request to the node waits out.
// Beside it, in the same run, the floor: a minimal program that does only the unavoidable work,
// reading every claim key of the state once and writing each moved one into a fresh table of the
// same size (open addressing, linear probing). Run by bench/run.sh; prints one JSON object.
// Argument: N (default 1,000,000).
import Foundation
import RegistryCore

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 1_000_000 : 1_000_000
let (a, b) = (Vendor(trusted: "com.a"), Vendor(trusted: "com.b"))
let origin = NodeID(trusted: "node-a")
var random = SplitMix64(seed: 42)
var state = RegistryState(expectedDevices: count)
var idfvs = [UUID128]()
idfvs.reserveCapacity(count / 2)
for index in 0..<count {
    let vendor = index % 2 == 0 ? a : b
    let time = HLCTimestamp(millis: 1_800_000_000_000 + UInt64(index / 1_000), counter: UInt16(index % 1_000))
    var idfv = UUID128(high: random.next() | 1, low: random.next())
    if vendor == a { idfvs.append(idfv) } else if index % 20 == 1 { idfv = idfvs[index / 2] }
    let device = DeviceID(UUID128(high: random.next() | 1, low: random.next()))
    let claims: IdentifierList = [Identifier(kind: .idfv, value: idfv), Identifier(kind: .keychain, value: UUID128(high: random.next() | 1, low: random.next()))]
    state.apply(
        .registration(
            RegistrationOp(
                device: DeviceRef(id: device, created: time, origin: origin, vendor: vendor), bundle: try! BundleID(parsing: "\(vendor.name).app"),
                claims: claims, merged: [], seen: time)))
    if vendor == a && index % 10 == 0 {
        state.apply(
            .binding(
                BindingChange(kind: .bind, vendor: a, account: UUID128(high: 1, low: UInt64(index)), device: device, time: time, origin: origin)))
    }
}
let claims = state.claimCount
let devicesBefore = state.deviceCount
let move = VendorRuleChange(
    kind: .set, name: "com.b", rule: try! VendorRule(name: "com.b", prefixes: ["com.b", "com.a"]),
    time: HLCTimestamp(millis: 1_900_000_000_000, counter: 0), origin: origin, move: VendorMove(from: ["com.a"], into: "com.b"))
let clock = ContinuousClock()
let started = clock.now
state.apply(.vendorRule(move))
let pause = clock.now - started
precondition(state.lookup(vendor: a, identifier: Identifier(kind: .idfv, value: idfvs[0]))?.device.vendor == b, "the move did not file com.a under com.b")

// The floor: every claim key read once, the moved half written into a fresh table.
struct Key {
    var high: UInt64
    var low: UInt64
    var scope: UInt32
}
var floorRandom = SplitMix64(seed: 7)
let keys = (0..<claims).map { index in Key(high: floorRandom.next() | 1, low: floorRandom.next(), scope: UInt32(index % 2) << 4 | 2) }
var capacity = 16
while capacity * 3 < claims * 4 { capacity <<= 1 }
let floorStarted = clock.now
let table = UnsafeMutablePointer<Key>.allocate(capacity: capacity)
table.initialize(repeating: Key(high: 0, low: 0, scope: 0), count: capacity)
for key in keys where key.scope >> 4 == 0 {
    var moved = key
    moved.scope |= 1 << 4
    var slot = Int(truncatingIfNeeded: (moved.high ^ moved.low &* 0x9E37_79B9_7F4A_7C15) >> 7) & (capacity - 1)
    while table[slot].high != 0 { slot = (slot + 1) & (capacity - 1) }
    table[slot] = moved
}
let floor = clock.now - floorStarted
table.deallocate()

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
}
print(
    """
    {"devices": \(count), "claims": \(claims), "bindings": \(state.bindingChangeCount), "merged": \(devicesBefore - state.deviceCount), \
    "pause_ms": \(String(format: "%.1f", milliseconds(pause))), "floor_ms": \(String(format: "%.1f", milliseconds(floor)))}
    """)
