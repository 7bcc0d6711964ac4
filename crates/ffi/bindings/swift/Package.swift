// swift-tools-version:5.9
// The PlanCheckpoint Swift package: the generated bindings (generated/,
// written by ../generate.sh) over the plan-ffi static library, which
// build-xcframework.sh builds for macOS and iOS into
// PlanCheckpointFFI.xcframework beside this file. This repository's CI has no
// Swift toolchain: the package is checked for consistency (check-package.sh),
// never compiled there. See README.md.
import PackageDescription

let package = Package(
    name: "PlanCheckpoint",
    // Keep in step with the deployment targets in build-xcframework.sh.
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "PlanCheckpoint", targets: ["PlanCheckpoint"]),
    ],
    targets: [
        // The module the generated Swift imports; its name is the one the
        // generated module map declares.
        .binaryTarget(name: "PlanCheckpointFFI", path: "PlanCheckpointFFI.xcframework"),
        // Named after module_name in crates/ffi/uniffi.toml. The header and
        // module map reach Swift through the XCFramework, not this target.
        .target(
            name: "PlanCheckpoint",
            dependencies: ["PlanCheckpointFFI"],
            path: "generated",
            exclude: ["PlanCheckpointFFI.h", "PlanCheckpointFFI.modulemap"],
            sources: ["PlanCheckpoint.swift"]
        ),
    ]
)
