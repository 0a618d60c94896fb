// swift-tools-version:6.2
import PackageDescription

/// Swift 6 language mode everywhere (below), and no warnings in our own targets.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "device-registry",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "RegistryClient", targets: ["RegistryClient"]),
        .executable(name: "registryd", targets: ["registryd"]),
        .executable(name: "registryctl", targets: ["registryctl"]),
        .executable(name: "registryload", targets: ["registryload"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // Micro-benchmarks (bench/Benchmarks); its malloc counts need the interposer trait.
        .package(url: "https://github.com/ordo-one/package-benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // C library from the system (Debian: libprotobuf-c-dev).
        .systemLibrary(
            name: "CProtobufC",
            pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]
        ),
        // A header for Linux file calls that Swift's Glibc module leaves out (no library).
        .systemLibrary(name: "CLinuxFile"),
        // SHA-256's block function, from swift-crypto's BoringSSL (no library: Crypto links it).
        .systemLibrary(name: "CSHA256Blocks"),
        // protoc-c output for Protos/registry/v1, committed; regenerate with `make protos`.
        .target(name: "CRegistryProto", dependencies: ["CProtobufC"]),

        // The platform's C library (Glibc, Musl or Darwin), chosen in one place.
        .target(name: "Platform", dependencies: ["CLinuxFile"], swiftSettings: swiftSettings),
        // The release and git revision that --version prints.
        .plugin(name: "GitRevisionPlugin", capability: .buildTool()),
        .target(name: "RegistryVersion", swiftSettings: swiftSettings, plugins: ["GitRevisionPlugin"]),

        // Identity rules, HLC, merge: pure values, no I/O, no NIO, no C.
        .target(name: "RegistryCore", dependencies: ["Platform"], swiftSettings: swiftSettings),
        // Swift message types, protobuf-c codec and frame coder. protobuf-c never leaves it.
        .target(
            name: "RegistryWire",
            dependencies: [
                "CRegistryProto", "CProtobufC", "RegistryCore", "Platform",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The operation log (journal files), snapshots and node metadata, as bytes, through the
        // FileSystem interface (the real disk, or a simulated one in tests).
        .target(
            name: "RegistryStorage",
            dependencies: ["CLinuxFile", "Platform", "RegistryCore"],
            swiftSettings: swiftSettings
        ),
        // Client tokens: what they grant, and signing and verifying them (HMAC through swift-crypto).
        .target(
            name: "RegistryAuth",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // The node: engine (state + durable log), SwiftNIO server, configuration.
        .target(
            name: "RegistryServer",
            dependencies: [
                "RegistryCore", "RegistryWire", "RegistryStorage", "RegistryVersion", "RegistryAuth", "CLinuxFile", "CSHA256Blocks", "Platform",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // Async, pipelining client for backend services and the tools.
        .target(
            name: "RegistryClient",
            dependencies: [
                "RegistryWire", "Platform",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "registryd",
            dependencies: [
                "RegistryServer", "RegistryVersion", "Platform",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "registryctl",
            dependencies: [
                "RegistryClient", "RegistryVersion", "RegistryAuth", "Platform",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // The load harness: workload model, schedule, objectives and report (pure) ...
        .target(
            name: "LoadGeneration",
            dependencies: ["RegistryCore", "RegistryWire", .product(name: "Histogram", package: "hdrhistogram-swift")],
            swiftSettings: swiftSettings
        ),
        // ... and the tool that drives it over real connections.
        .executableTarget(
            name: "registryload",
            dependencies: [
                "LoadGeneration", "RegistryClient", "RegistryWire", "RegistryCore", "RegistryVersion",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // What each fuzz target does with one input (FuzzBodies), and the libFuzzer targets
        // themselves: `make fuzz` builds them with --sanitize=fuzzer (scripts/fuzz.sh).
        .target(
            name: "RegistryFuzzing",
            dependencies: ["RegistryWire", "RegistryStorage", "RegistryCore", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        // Writes the fuzz targets' seed inputs: one of every message, frame and snapshot part.
        .executableTarget(
            name: "FuzzSeeds", dependencies: ["RegistryFuzzing", "RegistryWire", "RegistryStorage", "RegistryCore", .product(name: "NIOCore", package: "swift-nio")],
            path: "Fuzz/FuzzSeeds", swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzFrameDecoder", dependencies: ["RegistryFuzzing"], path: "Fuzz/FuzzFrameDecoder", swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzClientFrames", dependencies: ["RegistryFuzzing"], path: "Fuzz/FuzzClientFrames", swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzPeerFrames", dependencies: ["RegistryFuzzing"], path: "Fuzz/FuzzPeerFrames", swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzSnapshot", dependencies: ["RegistryFuzzing"], path: "Fuzz/FuzzSnapshot", swiftSettings: swiftSettings),

        // The keyed-hashing cost per identifier, with its floor and swift-crypto's HMAC in the same
        // run, under package-benchmark (bench/security.sh runs it).
        .executableTarget(
            name: "KeyedHashing",
            dependencies: [
                "RegistryServer", "RegistryCore", "CSHA256Blocks", .product(name: "Benchmark", package: "package-benchmark"),
            ],
            path: "bench/Benchmarks/KeyedHashing", swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]),
        // What a watcher pays to decode the change feed, with its floor in the same run (bench/feed.sh runs it).
        .executableTarget(
            name: "WatchDecoding",
            dependencies: [
                "RegistryWire", "RegistryCore", "WireWalk", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Benchmark", package: "package-benchmark"),
            ],
            path: "bench/Benchmarks/WatchDecoding", swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]),
        // What putting a batch of operations on the wire to a peer costs, with its floor in the same run.
        .executableTarget(
            name: "BatchEncoding",
            dependencies: [
                "RegistryWire", "RegistryCore", "PeerBatchSample", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Benchmark", package: "package-benchmark"),
            ],
            path: "bench/Benchmarks/BatchEncoding", swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]),
        // What reading a peer's batch of operations costs, with its floor in the same run.
        .executableTarget(
            name: "BatchDecoding",
            dependencies: [
                "RegistryWire", "RegistryCore", "WireWalk", "PeerBatchSample", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Benchmark", package: "package-benchmark"),
            ],
            path: "bench/Benchmarks/BatchDecoding", swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]),
        // What applying a peer's batch costs the state, with its floor in the same run.
        .executableTarget(
            name: "BatchApplying",
            dependencies: [
                "RegistryCore", "RegistryWire", "RegistryServer", "Platform", "PeerBatchSample", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Benchmark", package: "package-benchmark"),
            ],
            path: "bench/Benchmarks/BatchApplying", swiftSettings: swiftSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]),
        // The memory a binding takes in the state, against a flat array of packed records (bench/run.sh).
        .executableTarget(name: "BindingMemory", dependencies: ["RegistryCore"], path: "bench/BindingMemory", swiftSettings: swiftSettings),
        .executableTarget(name: "VendorMove", dependencies: ["RegistryCore"], path: "bench/VendorMove", swiftSettings: swiftSettings),
        // The change feed's floors (bench/feed.sh): watchers that decode nothing, or only walk every
        // field; and the feed's bytes alone.
        .executableTarget(
            name: "FeedFloor", dependencies: ["RegistryWire", "RegistryCore", "Platform", "WireWalk", .product(name: "NIOCore", package: "swift-nio")],
            path: "bench/FeedFloor", swiftSettings: swiftSettings),
        // The least a watcher that reads its events does: every field of a frame walked, nothing built.
        .target(name: "WireWalk", path: "bench/WireWalk", swiftSettings: swiftSettings),
        // The peer batch the batch benchmarks encode, decode and apply.
        .target(name: "PeerBatchSample", dependencies: ["RegistryWire", "RegistryCore"], path: "bench/PeerBatchSample", swiftSettings: swiftSettings),

        // Helpers the test targets share.
        .target(
            name: "RegistryTestSupport",
            dependencies: ["RegistryWire", "RegistryStorage", "Platform", .product(name: "NIOCore", package: "swift-nio")],
            path: "Tests/RegistryTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "RegistryAuthTests", dependencies: ["RegistryAuth"], swiftSettings: swiftSettings),
        .testTarget(name: "RegistryCoreTests", dependencies: ["RegistryCore", "Platform", "RegistryTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "LoadGenerationTests", dependencies: ["LoadGeneration", "RegistryCore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "RegistryClientTests",
            dependencies: [
                "RegistryClient", "RegistryWire", "RegistryTestSupport", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RegistryWireTests",
            dependencies: [
                "RegistryWire", "CRegistryProto", "Platform", "RegistryFuzzing", "RegistryCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RegistryStorageTests", dependencies: ["RegistryStorage", "RegistryCore", "RegistryTestSupport", "Platform"], swiftSettings: swiftSettings),
        .testTarget(
            name: "RegistryServerTests",
            dependencies: [
                "RegistryServer", "RegistryClient", "RegistryStorage", "RegistryTestSupport", "Platform",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "RegistryClient", "RegistryWire", "RegistryServer", "RegistryTestSupport", "Platform",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
