// Deciding on the approval card as its page does, for the tests that play
// the person at a browser.

import { request as httpRequest } from "node:http";

/** Decides on the card as its page does: `POST /decision` from the card's own origin, with its token. */
export function decideOnCard(cardUrl: string, body: Record<string, string>): Promise<number> {
  const url = new URL(cardUrl);
  const token = url.pathname.split("/").pop() ?? "";
  const payload = JSON.stringify({ token, ...body });
  return new Promise((resolve, reject) => {
    const sent = httpRequest(
      new URL("/decision", url),
      { method: "POST", headers: { "Content-Type": "application/json", Origin: url.origin, "Content-Length": Buffer.byteLength(payload) } },
      (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      },
    );
    sent.on("error", reject);
    sent.end(payload);
  });
}

