import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { buildOpenApi, type OpenApiSource } from '../openapi';
import type { PublicRoutes } from '../public-routes';
import { fileUnder, sendStatic, type StaticFile } from '../static-files';

export interface DocsOptions {
  source: OpenApiSource;
  /** A number that changes when the search parameters do (the document is rebuilt then). */
  revision?: () => number;
}

/** The Swagger UI files served (from the pinned swagger-ui-dist package, never a CDN). */
const SWAGGER_FILES = [
  'swagger-ui.css',
  'swagger-ui-bundle.js',
  'swagger-ui-standalone-preset.js',
  'favicon-32x32.png',
  'favicon-16x16.png',
];
/** The parts offered first (the whole document has ~2,600 operations and renders slowly). */
const TERMINOLOGY_TYPES = 'CodeSystem,ValueSet,ConceptMap,NamingSystem';

/**
 * The OpenAPI document at `{base}/openapi.json` and Swagger UI at `/docs`, both public: the
 * document describes the server, not its content.
 */
export function registerDocsRoutes(routes: PublicRoutes, options: DocsOptions): void {
  const documentUrl = `${options.source.base}/openapi.json`;
  const known = new Set(options.source.resourceTypes);
  // By the types asked for ('' for all), for the current search parameters; a few kept at most.
  const built = new Map<string, string>();
  let builtRevision = options.revision?.() ?? 0;
  routes.get(documentUrl, (request, reply) => {
    const revision = options.revision?.() ?? 0;
    if (revision !== builtRevision || built.size > 16) {
      built.clear();
      builtRevision = revision;
    }
    const asked = (request.query as { types?: unknown }).types;
    const types =
      typeof asked === 'string' ? [...new Set(asked.split(','))].filter((t) => known.has(t)).sort() : undefined;
    const key = types?.join(',') ?? '';
    let text = built.get(key);
    if (text === undefined) {
      text = JSON.stringify(buildOpenApi(options.source, types && new Set(types)));
      built.set(key, text);
    }
    reply.type('application/json; charset=utf-8').header('cache-control', 'no-cache');
    return text;
  });

  let files: Map<string, StaticFile> | undefined;
  const page = (name: string, request: FastifyRequest, reply: FastifyReply) => {
    files ??= swaggerFiles(documentUrl);
    return sendStatic(reply, files.get(name), request.url);
  };
  routes.get('/docs', (request, reply) => page('index.html', request, reply));
  routes.under('/docs', (request, reply) => page(fileUnder(request.url, '/docs'), request, reply));
}

function swaggerFiles(documentUrl: string): Map<string, StaticFile> {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve('swagger-ui-dist/package.json'));
  const files = new Map<string, StaticFile>();
  for (const name of SWAGGER_FILES) files.set(name, { name, body: readFileSync(join(dir, name)) });
  files.set('index.html', {
    name: 'index.html',
    body: `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>API documentation</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-ui-standalone-preset.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`,
  });
  // validatorUrl null: Swagger UI would otherwise send the document to validator.swagger.io.
  files.set('init.js', {
    name: 'init.js',
    body: `window.ui = SwaggerUIBundle(Object.assign(${JSON.stringify({
      urls: [
        { name: 'Terminology and system', url: `${documentUrl}?types=${TERMINOLOGY_TYPES}` },
        { name: 'Everything (every resource type; slow to render)', url: documentUrl },
      ],
      dom_id: '#swagger-ui',
      deepLinking: true,
      validatorUrl: null,
      docExpansion: 'none',
      defaultModelsExpandDepth: -1,
      layout: 'StandaloneLayout',
    })}, { presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], plugins: [SwaggerUIBundle.plugins.DownloadUrl] }));\n`,
  });
  return files;
}
