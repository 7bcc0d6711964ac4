// Types of the generator script, for the drift test that imports it.

/** The schema directory of the repository, relative to this package. */
export const defaultSchemaDir: string;
/** Where the generated module is committed. */
export const generatedFile: string;
/** Generates the module text from the schema files in `schemaDir`. */
export function generateProtocol(schemaDir?: string): string;
