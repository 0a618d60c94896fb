/// A value an ``Interner`` can number: it carries a cheap hash of its own (see ``TextHash``).
protocol Internable: Equatable, Sendable {
    var internHash: UInt64 { get }
}

/// Gives each distinct value a small number, so that millions of records can name one of a few
/// thousand vendors, bundles or nodes in 4 bytes instead of a word each.
///
/// Its table is open addressing over the values' own hashes, so a lookup costs one multiply-mix
/// hash (usually computed once, when the value was made) and one comparison, where a
/// `Dictionary` ran `Hasher` over the string every time.
struct Interner<Value: Internable>: Sendable {
    private var values: [Value] = []
    /// Buckets holding a value's number plus one; 0 is free. A power of two, at most half full.
    private var buckets = [UInt32](repeating: 0, count: 16)
    /// The number last interned: runs of one value (this node's ID) skip hashing.
    private var last: UInt32?

    /// The value's number, assigning the next one when it is new.
    mutating func intern(_ value: Value) -> UInt32 {
        if let last, values[Int(last)] == value { return last }
        let number: UInt32
        switch find(value) {
        case .found(let found):
            number = found
        case .free(let bucket):
            number = UInt32(values.count)
            values.append(value)
            buckets[bucket] = number + 1
            if values.count * 2 > buckets.count { grow() }
        }
        last = number
        return number
    }

    /// The value's number, or nil when it was never interned (a query must not add values).
    func number(of value: Value) -> UInt32? {
        if let last, values[Int(last)] == value { return last }
        if case .found(let number) = find(value) { return number }
        return nil
    }

    subscript(number: UInt32) -> Value { values[Int(number)] }

    /// How many values have numbers (they are numbered 0 up to this).
    var count: Int { values.count }

    private enum Probe {
        case found(UInt32)
        case free(Int)
    }

    private func find(_ value: Value) -> Probe {
        let mask = buckets.count - 1
        var bucket = Int(truncatingIfNeeded: value.internHash) & mask
        while true {
            let stored = buckets[bucket]
            if stored == 0 { return .free(bucket) }
            if values[Int(stored - 1)] == value { return .found(stored - 1) }
            bucket = (bucket + 1) & mask
        }
    }

    private mutating func grow() {
        buckets = [UInt32](repeating: 0, count: buckets.count * 2)
        let mask = buckets.count - 1
        for (number, value) in values.enumerated() {
            var bucket = Int(truncatingIfNeeded: value.internHash) & mask
            while buckets[bucket] != 0 { bucket = (bucket + 1) & mask }
            buckets[bucket] = UInt32(number) + 1
        }
    }
}
