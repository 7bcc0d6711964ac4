// The person at a browser: a decision sent as the approval card's own page
// sends it (its token, from its origin).

import { request } from "node:http";

/** POSTs `choice` to the card's `/decision` with the token of `cardUrl`; resolves with the HTTP status. */
export function decideOnCard(cardUrl: string, choice: Record<string, string>): Promise<number> {
  const card = new URL(cardUrl);
  const body = JSON.stringify({ ...choice, token: card.pathname.split("/").at(-1) ?? "" });
  return new Promise((resolve, reject) => {
    const sent = request(
      new URL("/decision", card),
      {
        method: "POST",
        headers: { "content-type": "application/json", origin: card.origin, "content-length": Buffer.byteLength(body) },
      },
      (response) => {
        response.resume();
        resolve(response.statusCode ?? 0);
      },
    );
    sent.on("error", reject);
    sent.end(body);
  });
}
