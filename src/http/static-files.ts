import type { FastifyReply } from 'fastify';
import { fhirError } from '../fhir/errors';

/** Content types of the files the pages are made of. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
  '.json': 'application/json; charset=utf-8',
};

/** What a page may load: only this server (no CDN, no inline script). */
const PAGE_POLICY =
  "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'";

/** A file a page is made of, known by name in advance (never a path taken from the request). */
export interface StaticFile {
  body: string | Buffer;
  name: string;
}

/** Sends a page's file with its type, the page policy and a short cache; 404 for a name not served. */
export function sendStatic(reply: FastifyReply, file: StaticFile | undefined, path: string, maxAge = 300): unknown {
  if (file === undefined) throw fhirError('ERR_ROUTE_UNKNOWN', { method: 'GET', path: path.slice(0, 200) });
  const ext = /\.[a-z]+$/.exec(file.name)?.[0] ?? '.html';
  reply
    .type(TYPES[ext] ?? 'application/octet-stream')
    .header('cache-control', `public, max-age=${maxAge}`)
    .header('x-content-type-options', 'nosniff')
    .header('content-security-policy', PAGE_POLICY);
  return file.body;
}

/** The last segment of a URL path under `root` (`/docs/swagger-ui.css` -> `swagger-ui.css`); '' for the root itself. */
export function fileUnder(url: string, root: string): string {
  const path = url.split('?')[0].replace(/\/+$/, '');
  return path.length > root.length ? path.slice(root.length + 1) : '';
}
