/// At most two identifiers, held in place: a registration's identifiers (one of each kind, and
/// there are two kinds) and a registration operation's claims (some of those).
///
/// Held in arrays, every registration allocated one for its identifiers, and every operation from
/// a peer or the journal one for its claims; and every copy retained and released it. This list
/// is plain data, so it allocates nothing and copies as bytes (`docs/performance.md`,
/// "Allocations a registration makes"). A generic list that held two elements in place and the
/// rest in an array was tried first: Swift copied it through its generic value witnesses, which
/// cost more than the allocation saved.
///
/// Behaves as an array of the same identifiers: the same order, indices from 0, equality and
/// description (`IdentifierListTests` checks it against `Array` over seeded random edits). Adding
/// a third is a programming error; a decoder that reads claims from the wire checks ``isFull``
/// first and refuses an operation with more.
public struct IdentifierList: Sendable {
    // Unused places hold `.keychain` and zero, so that equal lists are stored alike.
    private var values: (UUID128, UUID128) = (.zero, .zero)
    private var kinds: (IdentifierKind, IdentifierKind) = (.keychain, .keychain)
    private var stored: UInt8 = 0

    /// How many identifiers a list holds at most.
    public static let capacity = 2

    public init() {}

    public init(_ identifiers: some Sequence<Identifier>) {
        for identifier in identifiers { append(identifier) }
    }

    /// Whether the list holds ``capacity`` identifiers already.
    public var isFull: Bool { Int(stored) == Self.capacity }
}

extension IdentifierList: RandomAccessCollection, MutableCollection {
    public typealias Index = Int

    public var startIndex: Int { 0 }

    public var endIndex: Int { Int(stored) }

    public subscript(position: Int) -> Identifier {
        get {
            precondition(position >= 0 && position < Int(stored), "index \(position) is out of range of \(stored) identifiers")
            return position == 0 ? Identifier(kind: kinds.0, value: values.0) : Identifier(kind: kinds.1, value: values.1)
        }
        set {
            precondition(position >= 0 && position < Int(stored), "index \(position) is out of range of \(stored) identifiers")
            if position == 0 {
                (kinds.0, values.0) = (newValue.kind, newValue.value)
            } else {
                (kinds.1, values.1) = (newValue.kind, newValue.value)
            }
        }
    }
}

extension IdentifierList: RangeReplaceableCollection {
    public mutating func append(_ identifier: Identifier) {
        precondition(!isFull, "a list holds at most \(Self.capacity) identifiers")
        stored += 1
        self[Int(stored) - 1] = identifier
    }

    public mutating func removeAll(keepingCapacity _: Bool = false) {
        self = IdentifierList()
    }

    /// Any other edit rebuilds the list: none is on a hot path.
    public mutating func replaceSubrange(_ subrange: Range<Int>, with newElements: some Collection<Identifier>) {
        var all = Array(self)
        all.replaceSubrange(subrange, with: newElements)
        self = IdentifierList(all)
    }
}

extension IdentifierList: ExpressibleByArrayLiteral {
    public init(arrayLiteral identifiers: Identifier...) {
        self.init(identifiers)
    }
}

extension IdentifierList: Hashable {
    public static func == (lhs: IdentifierList, rhs: IdentifierList) -> Bool {
        lhs.elementsEqual(rhs)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(stored)
        for identifier in self { hasher.combine(identifier) }
    }
}

extension IdentifierList: CustomStringConvertible {
    public var description: String { Array(self).description }
}
