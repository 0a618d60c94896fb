import CRegistryProto
import RegistryCore

/// `registry.v1.VendorRuleSpec`: one vendor's rule as a client sends and reads it, unchecked.
public struct VendorRuleMessage: Hashable, Sendable {
    public var name: String
    public var prefixes: [String]
    /// 0: the default (1).
    public var maxDevices: UInt32
    /// 0: every bound device counts.
    public var activeWithinDays: UInt32
    public var pastLimit: BindingPolicy.PastLimit
    /// The clone action's wire number (``ClonePolicy/wireAction``); 0: the default (flag).
    public var cloneAction: UInt8
    /// 0: the default window (7 days).
    public var cloneWindowDays: UInt32

    public init(
        name: String, prefixes: [String], maxDevices: UInt32 = 0, activeWithinDays: UInt32 = 0, pastLimit: BindingPolicy.PastLimit = .reject,
        cloneAction: UInt8 = 0, cloneWindowDays: UInt32 = 0
    ) {
        self.name = name
        self.prefixes = prefixes
        self.maxDevices = maxDevices
        self.activeWithinDays = activeWithinDays
        self.pastLimit = pastLimit
        self.cloneAction = cloneAction
        self.cloneWindowDays = cloneWindowDays
    }

    /// The wire form of a rule in force.
    public init(_ rule: VendorRule) {
        self.init(
            name: rule.name, prefixes: rule.prefixes, maxDevices: UInt32(rule.binding.maxDevices),
            activeWithinDays: UInt32(rule.binding.activeWithinDays ?? 0), pastLimit: rule.binding.pastLimit,
            cloneAction: rule.clones.wireAction, cloneWindowDays: UInt32(rule.clones.windowDays))
    }

    /// The rule it asks for; throws ``IdentityError`` for what breaks the rules.
    public func validated() throws(IdentityError) -> VendorRule {
        let policy = try BindingPolicy(
            maxDevices: maxDevices == 0 ? 1 : Int(maxDevices), activeWithinDays: activeWithinDays == 0 ? nil : Int(activeWithinDays),
            pastLimit: pastLimit)
        let clones = try ClonePolicy.reading(action: cloneAction, windowDays: Int(clamping: cloneWindowDays))
        return try VendorRule(name: name.isEmpty ? nil : name, prefixes: prefixes, binding: policy, clones: clones)
    }
}

/// `registry.v1.VendorRequest`.
public enum VendorRequestMessage: Hashable, Sendable {
    case list
    /// `move`: carry out the move of devices the change makes (refused without it).
    case add(VendorRuleMessage, move: Bool = false)
    case set(VendorRuleMessage, move: Bool = false)
    case remove(name: String, move: Bool = false)
    /// No action this version knows.
    case unspecified
}

/// `registry.v1.VendorRules`: the rules in force.
public struct VendorRulesMessage: Hashable, Sendable {
    public var rules: [VendorRuleMessage]
    /// The default scope's depth in labels; 0 when it is the Public Suffix List.
    public var defaultDepth: UInt32
    /// The default scope in words.
    public var defaultScope: String
    /// Every vendor name a move joined to another, to the name it is filed under, sorted by name.
    public var aliases: [(name: String, filedUnder: String)]

    public init(rules: [VendorRuleMessage], defaultDepth: UInt32, defaultScope: String, aliases: [(name: String, filedUnder: String)] = []) {
        self.rules = rules
        self.defaultDepth = defaultDepth
        self.defaultScope = defaultScope
        self.aliases = aliases
    }

    public static func == (lhs: VendorRulesMessage, rhs: VendorRulesMessage) -> Bool {
        lhs.rules == rhs.rules && lhs.defaultDepth == rhs.defaultDepth && lhs.defaultScope == rhs.defaultScope
            && lhs.aliases.elementsEqual(rhs.aliases) { $0 == $1 }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(rules)
        hasher.combine(defaultScope)
        for alias in aliases {
            hasher.combine(alias.name)
            hasher.combine(alias.filedUnder)
        }
    }
}

/// Converts vendor requests and answers between their Swift and protobuf-c forms.
enum VendorCodec {
    static func spec(_ rule: VendorRuleMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__VendorRuleSpec> {
        var message = Registry__V1__VendorRuleSpec()
        registry__v1__vendor_rule_spec__init(&message)
        message.name = arena.string(rule.name)
        (message.n_prefixes, message.prefixes) = arena.strings(rule.prefixes)
        message.max_devices = rule.maxDevices
        message.active_within_days = rule.activeWithinDays
        message.past_limit = Registry__V1__BindingPastLimit(rawValue: UInt32(VendorRuleCodec.pastLimit(rule.pastLimit)))
        message.clone_action = Registry__V1__CloneAction(rawValue: UInt32(rule.cloneAction))
        message.clone_window_days = rule.cloneWindowDays
        return arena.new(message)
    }

    static func spec(_ message: Registry__V1__VendorRuleSpec) -> VendorRuleMessage {
        VendorRuleMessage(
            name: CRead.string(message.name), prefixes: CRead.strings(message.n_prefixes, message.prefixes), maxDevices: message.max_devices,
            activeWithinDays: message.active_within_days,
            pastLimit: message.past_limit == REGISTRY__V1__BINDING_PAST_LIMIT__BINDING_PAST_LIMIT_REPLACE ? .replace : .reject,
            cloneAction: UInt8(clamping: message.clone_action.rawValue), cloneWindowDays: message.clone_window_days)
    }

    static func request(_ request: VendorRequestMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__VendorRequest> {
        var message = Registry__V1__VendorRequest()
        registry__v1__vendor_request__init(&message)
        switch request {
        case .list:
            var list = Registry__V1__VendorListRequest()
            registry__v1__vendor_list_request__init(&list)
            message.action_case = REGISTRY__V1__VENDOR_REQUEST__ACTION_LIST
            message.list = arena.new(list)
        case .add(let rule, let move):
            message.action_case = REGISTRY__V1__VENDOR_REQUEST__ACTION_ADD
            message.add = spec(rule, in: arena)
            message.move = move ? 1 : 0
        case .set(let rule, let move):
            message.action_case = REGISTRY__V1__VENDOR_REQUEST__ACTION_SET
            message.set = spec(rule, in: arena)
            message.move = move ? 1 : 0
        case .remove(let name, let move):
            message.action_case = REGISTRY__V1__VENDOR_REQUEST__ACTION_REMOVE
            message.remove = arena.string(name)
            message.move = move ? 1 : 0
        case .unspecified:
            break
        }
        return arena.new(message)
    }

    static func request(_ message: Registry__V1__VendorRequest) -> VendorRequestMessage {
        switch message.action_case {
        case REGISTRY__V1__VENDOR_REQUEST__ACTION_LIST: return .list
        case REGISTRY__V1__VENDOR_REQUEST__ACTION_ADD: return message.add.map { .add(spec($0.pointee), move: message.move != 0) } ?? .unspecified
        case REGISTRY__V1__VENDOR_REQUEST__ACTION_SET: return message.set.map { .set(spec($0.pointee), move: message.move != 0) } ?? .unspecified
        case REGISTRY__V1__VENDOR_REQUEST__ACTION_REMOVE: return .remove(name: CRead.string(message.remove), move: message.move != 0)
        default: return .unspecified
        }
    }

    static func rules(_ rules: VendorRulesMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__VendorRules> {
        var message = Registry__V1__VendorRules()
        registry__v1__vendor_rules__init(&message)
        message.n_rules = rules.rules.count
        message.rules = arena.array(rules.rules.map { Optional(spec($0, in: arena)) })
        message.default_depth = rules.defaultDepth
        message.default_scope = arena.string(rules.defaultScope)
        message.n_aliases = rules.aliases.count
        message.aliases = arena.array(
            rules.aliases.map { alias in
                var entry = Registry__V1__VendorAlias()
                registry__v1__vendor_alias__init(&entry)
                entry.name = arena.string(alias.name)
                entry.filed_under = arena.string(alias.filedUnder)
                return Optional(arena.new(entry))
            })
        return arena.new(message)
    }

    static func rules(_ message: Registry__V1__VendorRules) -> VendorRulesMessage {
        let specs = (0..<message.n_rules).compactMap { index in message.rules?[index].map { spec($0.pointee) } }
        let aliases = (0..<message.n_aliases).compactMap { index in
            message.aliases?[index].map { (name: CRead.string($0.pointee.name), filedUnder: CRead.string($0.pointee.filed_under)) }
        }
        return VendorRulesMessage(
            rules: specs, defaultDepth: message.default_depth, defaultScope: CRead.string(message.default_scope), aliases: aliases)
    }
}
