import ArgumentParser
import Foundation
import Platform
import RegistryAuth

/// `registryctl token`: client tokens, made offline from the node's token secret.
struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Issue client tokens.",
        subcommands: [Issue.self])

    struct Issue: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a signed token granting vendors and roles until it expires.",
            discussion: """
                The token is signed with the secret the nodes run with (--token-secret on registryd); \
                no node is contacted. A service presents it in its hello (RegistryClient.connect(token:)). \
                It cannot be revoked before it expires except by changing the secret on every node, which \
                voids every token: keep lifetimes short (docs/security.md).

                Example:
                  registryctl token issue --secret-file /etc/registry/token-secret --vendor com.acme --role register --role read --expires-in 30d --subject billing-api
                """)

        @Option(name: .customLong("secret-file"), help: "File holding the token secret. [env: REGISTRY_TOKEN_SECRET holds the secret itself]")
        var secretFile: String?

        @Option(name: .customLong("vendor"), help: "A vendor the token covers, e.g. com.acme (repeat for more).")
        var vendors: [String] = []

        @Flag(name: .customLong("all-vendors"), help: "Cover every vendor (operators' tokens).")
        var allVendors = false

        @Option(name: .customLong("role"), help: "register, read or admin (repeat for more).")
        var roles: [String] = []

        @Option(name: .customLong("expires-in"), help: "Lifetime: a number with s, m, h or d, e.g. 90m or 30d.")
        var expiresIn: String = "30d"

        @Option(help: "Whom the token is for, as the node's logs name it.")
        var subject: String = "unnamed"

        func validate() throws {
            guard allVendors != !vendors.isEmpty else { throw ValidationError("give --vendor (one or more) or --all-vendors") }
            guard !roles.isEmpty else { throw ValidationError("give at least one --role: register, read or admin") }
            for role in roles where TokenRole(rawValue: role) == nil {
                throw ValidationError("--role \(role) is not register, read or admin")
            }
            guard Self.seconds(expiresIn) != nil else { throw ValidationError("--expires-in \(expiresIn) is not a number with s, m, h or d") }
        }

        func run() throws {
            let secret: String
            if let secretFile {
                guard let data = FileManager.default.contents(atPath: secretFile) else {
                    throw ValidationError("cannot read the secret file \(secretFile)")
                }
                secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            } else if let text = ProcessInfo.processInfo.environment["REGISTRY_TOKEN_SECRET"] {
                secret = text
            } else {
                throw ValidationError("give --secret-file, or the secret in REGISTRY_TOKEN_SECRET")
            }
            let expiry = SystemClock.wallMillis() / 1_000 + Self.seconds(expiresIn)!
            let token = AccessToken(
                subject: subject, vendors: allVendors ? .all : .only(Set(vendors.map { $0.lowercased() })),
                roles: Set(roles.compactMap(TokenRole.init(rawValue:))), expiresAt: expiry)
            do {
                print(try TokenKey(secret: secret).issue(token))
            } catch {
                throw ValidationError("\(error)")
            }
        }

        /// `90m` and the like in seconds; nil for anything else.
        static func seconds(_ text: String) -> UInt64? {
            guard let unit = text.last, let count = UInt64(text.dropLast()), count > 0 else { return nil }
            switch unit {
            case "s": return count
            case "m": return count * 60
            case "h": return count * 3_600
            case "d": return count * 86_400
            default: return nil
            }
        }
    }
}
