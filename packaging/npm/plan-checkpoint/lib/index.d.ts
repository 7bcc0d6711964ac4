/** The per-platform package of each supported `${process.platform}-${process.arch}`. */
export declare const PLATFORM_PACKAGES: Readonly<Record<string, string>>;
/** Why no binary could be found, with what to do about it. */
export declare class BinaryNotFoundError extends Error {
  readonly code: "PLAN_CHECKPOINT_BINARY_NOT_FOUND";
}
/** The per-platform package for this machine, or null when there is none. */
export declare function platformPackage(platform?: string, arch?: string): string | null;
/** The absolute path of the plan-checkpoint binary for this machine; throws a BinaryNotFoundError saying what to install. */
export declare function binaryPath(): string;
