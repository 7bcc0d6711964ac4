// Copies the built `<plan-approval-card>` (dist/card/card/plan-approval-card.js)
// to where the host's web server embeds it (crates/server/assets), so that
// building the Rust crates needs no Node. Run `npm run card:asset` after
// changing src/card; the package's tests fail while the two differ.
import { copyFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const built = fileURLToPath(new URL("../dist/card/card/plan-approval-card.js", import.meta.url));
const asset = fileURLToPath(new URL("../../../crates/server/assets/plan-approval-card.js", import.meta.url));
copyFileSync(built, asset);
console.log(`wrote ${asset}`);
