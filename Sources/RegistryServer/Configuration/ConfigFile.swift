import Foundation
import RegistryCore

/// A node's JSON config file (deploy/registryd.json shows every key), read into the text of each
/// setting it gives, and its vendor rules. Every key is optional; a key that no setting has is
/// an error that names the nearest known key, so a misspelling never leaves a default in force
/// silently.
struct ConfigFile {
    /// Setting flag to the text of the value the file gives it.
    private(set) var values: [String: String] = [:]
    /// The vendor rules, when the file gives `vendors` or `vendorDefaultDepth`.
    private(set) var vendorRules: VendorRules?
    /// Whether the file gives `vendorDefaultDepth`: then the default vendor is that many labels,
    /// and the Public Suffix List is not read.
    private(set) var givesDefaultDepth = false
    let path: String

    init(path: String) throws(ConfigurationError) {
        self.path = path
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
        let object: [String: JSONValue]
        do {
            let decoder = JSONDecoder()
            decoder.allowsJSON5 = false
            guard case .object(let top) = try decoder.decode(JSONValue.self, from: data) else {
                throw ConfigurationError.invalid(path: path, reason: "the top level should be an object of settings")
            }
            object = top
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw .invalid(path: path, reason: "not valid JSON: \(Self.describe(error))")
        }
        let known = NodeSetting.all.map(\.fileKey) + NodeConfiguration.fileOnlyKeys
        for key in object.keys.sorted() where !known.contains(key) {
            throw .unknownKey(path: path, key: key, nearest: NearestName.closest(to: key, among: known))
        }
        for setting in NodeSetting.all {
            guard let value = object[setting.fileKey] else { continue }
            guard let text = value.text(as: setting.fileType) else {
                throw .invalid(path: path, reason: "\(setting.fileKey) should be \(setting.fileType)")
            }
            values[setting.flag] = text
        }
        givesDefaultDepth = object["vendorDefaultDepth"] != nil
        if object["vendors"] != nil || object["vendorDefaultDepth"] != nil {
            vendorRules = try Self.vendorRules(vendors: object["vendors"], depth: object["vendorDefaultDepth"], path: path)
        }
    }

    private static func vendorRules(vendors: JSONValue?, depth: JSONValue?, path: String) throws(ConfigurationError) -> VendorRules {
        var rules = [VendorRule]()
        if let vendors {
            guard case .array(let items) = vendors else { throw .invalid(path: path, reason: "vendors should be an array") }
            for (index, item) in items.enumerated() {
                guard case .object(let fields) = item else { throw .invalid(path: path, reason: "vendors[\(index)] should be an object") }
                let known = ["name", "prefixes", "binding", "clones"]
                for key in fields.keys.sorted() where !known.contains(key) {
                    throw .unknownKey(path: path, key: "vendors[\(index)].\(key)", nearest: NearestName.closest(to: key, among: known))
                }
                guard case .array(let prefixValues)? = fields["prefixes"] else {
                    throw .invalid(path: path, reason: "vendors[\(index)].prefixes is missing or not an array of strings")
                }
                var prefixes = [String]()
                for value in prefixValues {
                    guard case .string(let prefix) = value else {
                        throw .invalid(path: path, reason: "vendors[\(index)].prefixes should hold strings")
                    }
                    prefixes.append(prefix)
                }
                var name: String?
                if let value = fields["name"] {
                    guard case .string(let text) = value else { throw .invalid(path: path, reason: "vendors[\(index)].name should be a string") }
                    name = text
                }
                let binding = try fields["binding"].map { value throws(ConfigurationError) in
                    try bindingPolicy(value, at: "vendors[\(index)].binding", path: path)
                }
                let clones = try fields["clones"].map { value throws(ConfigurationError) in
                    try clonePolicy(value, at: "vendors[\(index)].clones", path: path)
                }
                do {
                    rules.append(try VendorRule(name: name, prefixes: prefixes, binding: binding ?? .default, clones: clones ?? .default))
                } catch {
                    throw .invalid(path: path, reason: "vendors[\(index)]: \(error)")
                }
            }
        }
        var defaultDepth = 2
        if let depth {
            guard let text = depth.text(as: .wholeNumber), let value = Int(text) else {
                throw .invalid(path: path, reason: "vendorDefaultDepth should be a whole number")
            }
            defaultDepth = value
        }
        do {
            return try VendorRules(rules: rules, defaultDepth: defaultDepth)
        } catch {
            throw .invalid(path: path, reason: "vendors: \(error)")
        }
    }

    /// A vendor's `binding` object: `maxDevices` (default 1), `activeWithinDays` (default: every
    /// bound device counts) and `pastLimit` (`reject`, the default, or `replace`).
    private static func bindingPolicy(_ value: JSONValue, at key: String, path: String) throws(ConfigurationError) -> BindingPolicy {
        guard case .object(let fields) = value else { throw .invalid(path: path, reason: "\(key) should be an object") }
        let known = ["maxDevices", "activeWithinDays", "pastLimit"]
        for name in fields.keys.sorted() where !known.contains(name) {
            throw .unknownKey(path: path, key: "\(key).\(name)", nearest: NearestName.closest(to: name, among: known))
        }
        func whole(_ name: String) throws(ConfigurationError) -> Int? {
            guard let field = fields[name] else { return nil }
            guard let text = field.text(as: .wholeNumber), let number = Int(text) else {
                throw .invalid(path: path, reason: "\(key).\(name) should be a whole number")
            }
            return number
        }
        var pastLimit = BindingPolicy.PastLimit.reject
        if let field = fields["pastLimit"] {
            guard case .string(let text) = field, let parsed = BindingPolicy.PastLimit(rawValue: text) else {
                throw .invalid(path: path, reason: "\(key).pastLimit should be \"reject\" or \"replace\"")
            }
            pastLimit = parsed
        }
        do {
            return try BindingPolicy(maxDevices: try whole("maxDevices") ?? 1, activeWithinDays: try whole("activeWithinDays"), pastLimit: pastLimit)
        } catch {
            throw .invalid(path: path, reason: "\(key): \(error)")
        }
    }

    /// A vendor's `clones` object: `action` (`flag`, the default, `split` or `off`) and
    /// `windowDays` (default 7).
    private static func clonePolicy(_ value: JSONValue, at key: String, path: String) throws(ConfigurationError) -> ClonePolicy {
        guard case .object(let fields) = value else { throw .invalid(path: path, reason: "\(key) should be an object") }
        let known = ["action", "windowDays"]
        for name in fields.keys.sorted() where !known.contains(name) {
            throw .unknownKey(path: path, key: "\(key).\(name)", nearest: NearestName.closest(to: name, among: known))
        }
        var action = ClonePolicy.Action.flag
        if let field = fields["action"] {
            guard case .string(let text) = field, let parsed = ClonePolicy.Action(rawValue: text) else {
                throw .invalid(path: path, reason: "\(key).action should be \"flag\", \"split\" or \"off\"")
            }
            action = parsed
        }
        var window = ClonePolicy.defaultWindowDays
        if let field = fields["windowDays"] {
            guard let text = field.text(as: .wholeNumber), let number = Int(text) else {
                throw .invalid(path: path, reason: "\(key).windowDays should be a whole number")
            }
            window = number
        }
        do {
            return try ClonePolicy(action: action, windowDays: window)
        } catch {
            throw .invalid(path: path, reason: "\(key): \(error)")
        }
    }

    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .dataCorrupted(let context): return context.debugDescription
        default: return "\(error)"
        }
    }
}

/// Any JSON value, as the config file holds it.
enum JSONValue: Decodable {
    case string(String)
    case wholeNumber(Int)
    case number(Double)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var items = [JSONValue]()
            while !array.isAtEnd { items.append(try array.decode(JSONValue.self)) }
            self = .array(items)
        } else if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var fields = [String: JSONValue]()
            for key in object.allKeys { fields[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(fields)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let value = try? single.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? single.decode(Int.self) {
                self = .wholeNumber(value)
            } else if let value = try? single.decode(Double.self) {
                self = .number(value)
            } else {
                self = .string(try single.decode(String.self))
            }
        }
    }

    /// The value's text for a setting of `type`, nil when it is not that JSON type.
    func text(as type: NodeSetting.FileType) -> String? {
        switch (self, type) {
        case (.string(let text), .string): return text
        case (.wholeNumber(let value), .wholeNumber), (.wholeNumber(let value), .number): return String(value)
        case (.number(let value), .number): return String(value)
        case (.bool(let value), .boolean): return String(value)
        default: return nil
        }
    }

    private struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
