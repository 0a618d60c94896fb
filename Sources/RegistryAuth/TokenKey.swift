import Crypto

/// The secret that signs and verifies client tokens (`--token-secret` on the node, the same
/// secret for `registryctl token issue`).
///
/// A token is `rgt1.<claims>.<signature>`: the claims are a few `key=value` lines (`sub`,
/// `vendors`, `roles`, `exp`) in base64url, and the signature is HMAC-SHA256 under this key of
/// the text before the second dot, in base64url. A node verifies a token with one HMAC when a
/// connection says hello, with no lookup; revoking one means rotating the secret, or waiting for
/// its expiry (docs/security.md).
public struct TokenKey: Sendable {
    static let prefix = "rgt1"
    private let key: SymmetricKey

    /// The key of `secret`: HMAC-SHA256 of a fixed label under the secret's UTF-8 bytes, so that
    /// the same text used elsewhere derives an unrelated key.
    public init(secret: String) {
        let derived = HMAC<SHA256>.authenticationCode(for: Array("registry token key v1".utf8), using: SymmetricKey(data: Array(secret.utf8)))
        key = SymmetricKey(data: Array(derived))
    }

    /// A signed token for `token`'s claims. Vendor names and the subject must not hold the
    /// characters the claims are written with (newline, `,`, `=`).
    public func issue(_ token: AccessToken) throws(TokenError) -> String {
        let vendors: String
        switch token.vendors {
        case .all: vendors = "*"
        case .only(let names):
            guard !names.isEmpty else { throw .malformed("a token needs at least one vendor, or every vendor (*)") }
            for name in names where name.isEmpty || name.contains(where: { $0 == "," || $0 == "\n" || $0 == "=" || $0 == "*" }) {
                throw .malformed("vendor \(name.debugDescription) is not a vendor name")
            }
            vendors = names.sorted().joined(separator: ",")
        }
        guard !token.roles.isEmpty else { throw .malformed("a token needs at least one role (register, read, admin)") }
        guard !token.subject.contains("\n") else { throw .malformed("the subject holds a newline") }
        let claims = "sub=\(token.subject)\nvendors=\(vendors)\nroles=\(token.roles.sorted().map(\.rawValue).joined(separator: ","))\nexp=\(token.expiresAt)\n"
        let signed = Self.prefix + "." + Base64URL.encode(Array(claims.utf8))
        let signature = HMAC<SHA256>.authenticationCode(for: Array(signed.utf8), using: key)
        return signed + "." + Base64URL.encode(Array(signature))
    }

    /// The claims of `text` once its signature verifies and it has not expired at `now` (seconds
    /// since the Unix epoch).
    public func verify(_ text: String, now: UInt64) throws(TokenError) -> AccessToken {
        guard !text.isEmpty else { throw .missing }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == Self.prefix else { throw .malformed("not of the form \(Self.prefix).<claims>.<signature>") }
        guard let claimBytes = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]) else {
            throw .malformed("not base64url")
        }
        let signed = Array(text.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: key) else { throw .forged }
        let token = try Self.parse(claims: String(decoding: claimBytes, as: UTF8.self))
        guard now < token.expiresAt else { throw .expired(at: token.expiresAt) }
        return token
    }

    /// Claims that a valid signature vouches for; a parse failure here means the issuer wrote
    /// something this version does not read.
    private static func parse(claims: String) throws(TokenError) -> AccessToken {
        var fields = [Substring: Substring]()
        for line in claims.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { throw .malformed("claim line \(line.debugDescription) is not key=value") }
            fields[line[..<equals]] = line[line.index(after: equals)...]
        }
        guard let subject = fields["sub"], let vendorText = fields["vendors"], let roleText = fields["roles"],
            let expiry = fields["exp"].flatMap({ UInt64($0) })
        else { throw .malformed("the claims lack sub, vendors, roles or exp") }
        var roles = Set<TokenRole>()
        for name in roleText.split(separator: ",") {
            guard let role = TokenRole(rawValue: String(name)) else { throw .malformed("unknown role \(name.debugDescription)") }
            roles.insert(role)
        }
        let vendors: AccessToken.Vendors = vendorText == "*" ? .all : .only(Set(vendorText.split(separator: ",").map(String.init)))
        return AccessToken(subject: String(subject), vendors: vendors, roles: roles, expiresAt: expiry)
    }
}
