// swift-tools-version:6.2
import PackageDescription

/// Our own targets build with every warning as an error; dependencies keep their own settings.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "ingest",
    platforms: [.macOS(.v13)],  // Linux is the target; this only satisfies dependency minimums.
    products: [
        .executable(name: "ingest", targets: ["ingest"]),
        .library(name: "IngestKit", targets: ["IngestKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // System libraries, found through pkg-config; `make deps` installs the -dev packages.
        .systemLibrary(name: "CXXHash", pkgConfig: "libxxhash", providers: [.apt(["libxxhash-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CUdev", pkgConfig: "libudev", providers: [.apt(["libudev-dev"])]),
        // Intel ISA-L: CRC32C for part checksums at memory speed (crc32_iscsi).
        .systemLibrary(name: "CIsal", pkgConfig: "libisal", providers: [.apt(["libisal-dev"])]),

        // Linux calls Swift's Glibc module leaves out (they need _GNU_SOURCE).
        .target(name: "CSystemShims"),

        .target(
            name: "IngestKit",
            dependencies: [
                "CXXHash", "CCurl", "CUdev", "CIsal", "CSystemShims",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            // Debug builds, the ones the tests run, can inflict faults on themselves
            // (Upload/FaultHooks.swift); release builds cannot.
            swiftSettings: strict + [.define("INGEST_FAULT_HOOKS", .when(configuration: .debug))]
        ),
        .executableTarget(
            name: "ingest",
            dependencies: [
                "IngestKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Helpers both test targets share: temporary directories, processes, external oracles.
        .target(
            name: "IngestTestSupport", dependencies: ["CSystemShims"], path: "Tests/IngestTestSupport",
            swiftSettings: strict),
        .testTarget(name: "IngestKitTests", dependencies: ["IngestKit", "IngestTestSupport"], swiftSettings: strict),
        .testTarget(
            name: "IngestIntegrationTests",
            dependencies: ["IngestKit", "IngestTestSupport"],
            swiftSettings: strict
        ),
    ]
)
