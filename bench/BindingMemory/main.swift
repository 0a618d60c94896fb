// Memory a binding takes in a node's state: the resident memory a RegistryState gains while
// N binding changes are applied (each binds a new account to a device of one vendor, as a first
// login does), per change, at N = 1M and 10M. Beside it, in the same run, the floor: the same
// changes packed into one flat array of 48-byte records (account, device, time, interned vendor,
// interned origin with the kind in its low bits), which any layout needs at the least before it
// can find an account; what the state takes beyond it is its two indexes.
// Also the longest single apply, which is when the binding indexes grow (RecordIndex rehashes
// every entry at once). Run by bench/run.sh; prints one JSON object. Argument: the largest N (default 10,000,000).
import Foundation
import RegistryCore

/// Resident bytes of this process, from /proc/self/statm.
func residentBytes() -> Int {
    let fields = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8))?.split(separator: " ") ?? []
    return (fields.count > 1 ? Int(fields[1]) ?? 0 : 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// The nth change: a new account, a device, one vendor and one origin.
func change(_ index: Int, vendor: Vendor, origin: NodeID) -> BindingChange {
    var random = SplitMix64(seed: UInt64(index))
    return BindingChange(
        kind: .bind, vendor: vendor, account: UUID128(high: random.next(), low: random.next()),
        device: DeviceID(UUID128(high: random.next(), low: random.next())),
        time: HLCTimestamp(millis: 1_800_000_000_000 + UInt64(index) / 1_000, counter: UInt16(index % 1_000)), origin: origin)
}

/// The floor's record: what a change holds, names interned.
struct PackedChange {
    let account: UUID128
    let device: UUID128
    let time: UInt64
    let vendor: UInt32
    let originAndKind: UInt32
}

let largest = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 10_000_000 : 10_000_000
let vendor = Vendor(trusted: "com.vendor")
let origin = NodeID(trusted: "node-a")
var results = [String]()
for count in [1_000_000, largest] where count <= largest {
    let before = residentBytes()
    var state = RegistryState()
    // The longest single apply: the binding indexes grow by rehashing every entry at once.
    var longest = Duration.zero
    let clock = ContinuousClock()
    for index in 0..<count {
        let next = change(index, vendor: vendor, origin: origin)
        let started = clock.now
        state.apply(next)
        longest = max(longest, clock.now - started)
    }
    let stateBytes = residentBytes() - before
    precondition(state.bindingChangeCount == count)
    let floorBefore = residentBytes()
    var packed = [PackedChange]()
    packed.reserveCapacity(count)
    for index in 0..<count {
        let next = change(index, vendor: vendor, origin: origin)
        packed.append(PackedChange(account: next.account, device: next.device.uuid, time: next.time.rawValue, vendor: 0, originAndKind: UInt32(next.kind.rawValue)))
    }
    let floorBytes = residentBytes() - floorBefore
    precondition(packed.count == count)
    results.append(
        "{\"bindings\": \(count), \"state_bytes_per_binding\": \(Double(stateBytes) / Double(count)), "
            + "\"floor_bytes_per_binding\": \(Double(floorBytes) / Double(count)), \"record_stride\": \(MemoryLayout<PackedChange>.stride), "
            + "\"longest_apply_ms\": \(Double(longest.components.attoseconds) / 1e15 + Double(longest.components.seconds) * 1e3)}")
    withExtendedLifetime(state) {}
}
print("[" + results.joined(separator: ", ") + "]")
