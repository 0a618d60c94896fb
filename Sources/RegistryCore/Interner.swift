/// Gives each distinct value a small number, so that millions of records can name one of a few
/// thousand vendors, bundles or nodes in 4 bytes instead of a string.
struct Interner<Value: Hashable & Sendable>: Sendable {
    private var values: [Value] = []
    private var numbers: [Value: UInt32] = [:]
    /// The number last interned: runs of one value (this node's ID) skip hashing.
    private var last: UInt32?

    /// The value's number, assigning the next one when it is new.
    mutating func intern(_ value: Value) -> UInt32 {
        if let last, values[Int(last)] == value { return last }
        if let number = numbers[value] {
            last = number
            return number
        }
        let number = UInt32(values.count)
        values.append(value)
        numbers[value] = number
        last = number
        return number
    }

    /// The value's number, or nil when it was never interned (a query must not add values).
    func number(of value: Value) -> UInt32? { numbers[value] }

    subscript(number: UInt32) -> Value { values[Int(number)] }
}
