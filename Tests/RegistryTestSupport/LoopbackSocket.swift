import Foundation

/// A TCP socket bound to a free port on 127.0.0.1 (not listening): its descriptor and port, or nil.
public func boundLoopbackSocket() -> (descriptor: Int32, port: Int)? {
    // Ports below the kernel's ephemeral range (32768 and up by default), chosen at random: a
    // port the kernel handed out would be free again once closed, and the next outgoing
    // connection of any test could take it before the node that was given it binds it
    // ("Address already in use").
    for _ in 0..<200 {
        if let bound = bindLoopback(port: UInt16.random(in: 20_000...32_000)) { return bound }
    }
    return bindLoopback(port: 0)
}

/// A TCP socket listening on 127.0.0.1, on a port the kernel picks, for a server a test keeps
/// running: its descriptor and port, or nil. The kernel picks from its ephemeral range, which
/// ``boundLoopbackSocket()`` stays below, so no other test can have been told the port is free
/// (and connect to it, taking it for its own server).
public func listeningLoopbackSocket(backlog: Int32 = 16) -> (descriptor: Int32, port: Int)? {
    guard let bound = bindLoopback(port: 0) else { return nil }
    guard listen(bound.descriptor, backlog) == 0 else {
        close(bound.descriptor)
        return nil
    }
    return bound
}

/// A TCP socket bound to 127.0.0.1:`port` (0: a port the kernel picks), and the port.
private func bindLoopback(port: UInt16) -> (descriptor: Int32, port: Int)? {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
    }
    guard bound else {
        close(descriptor)
        return nil
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}
