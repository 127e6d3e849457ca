// ESLint: the layering rules of docs/../CONVENTIONS ("imports point down, never up") as import
// restrictions, and a small set of correctness rules. Style is Prettier's job (npm run format).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { importX } from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const root = path.dirname(fileURLToPath(import.meta.url));
const src = (p) => path.join(root, 'src', p);

/** Only these files speak HTTP: the routes and hooks, and the composition root that starts them. */
const HTTP_FILES = ['src/http/**', 'src/app.ts', 'src/bootstrap.ts', 'src/server.ts'];

/**
 * Folders and what each may import from the rest of src/ (packages are always allowed). `from` is
 * what is forbidden, `except` carves out what is allowed inside it (paths relative to `from`).
 */
const LAYERS = [
  {
    target: 'src/terminology',
    from: ['src/storage', 'src/content', 'src/http'],
    message:
      'The terminology engine knows no storage, no content loading and no HTTP: content feeds it through the port it declares.',
  },
  {
    // Everything in src/ outside the engine (src/*.ts and every other folder).
    target: [src('!(terminology)/**'), src('*.ts')],
    from: 'src/terminology',
    except: ['./service.ts'],
    message: 'Only the facade, src/terminology/service.ts, is the way into the terminology engine.',
  },
  {
    target: 'src/storage',
    from: 'src',
    except: ['./storage', './fhir', './context'],
    message: 'Storage stands on src/fhir and src/context only; nothing above it.',
  },
  {
    target: 'src/context',
    from: 'src',
    // Deliberate: the context carries who the request is, a type the auth room defines with its
    // scopes (src/auth/principal.ts imports only auth/scopes, types too); moving it would split auth.
    except: ['./context', './fhir', './auth/principal.ts', './auth/scopes.ts'],
    message: 'The request context and tenancy are the ground every layer stands on: they import only src/fhir.',
  },
  {
    target: 'src/fhir',
    from: 'src',
    // Deliberate: the element model reads its generated JSON from definitions/, whose place
    // src/project.ts names (it only finds the project's folders; it imports nothing of src/).
    except: ['./fhir', './context', './project.ts'],
    message: 'Transport-free FHIR imports only src/context.',
  },
];

export default tseslint.config(
  {
    // What .gitignore keeps out (ESLint's flat config does not read it), and data.
    ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.tmp/**', 'data/**', 'test-artifacts/**', 'definitions/**'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.js', '**/*.mjs'],
    languageOptions: { ecmaVersion: 2023, sourceType: 'module' },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [
        createTypeScriptImportResolver({
          project: ['tsconfig.json', 'web/tsconfig.json'],
          noWarnOnMultipleProjects: true,
        }),
      ],
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // Globals (process, URL, fetch, document) are checked by tsc with the right lib for each tsconfig.
      'no-undef': 'off',
      // FHIR's string datatypes and the SQL escaping match control characters on purpose.
      'no-control-regex': 'off',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'import-x/no-restricted-paths': ['error', { basePath: root, zones: LAYERS }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: HTTP_FILES,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'fastify', message: 'Only src/http (and the composition root) imports Fastify.' }],
          patterns: [
            {
              group: ['@fastify/*', 'fastify/*'],
              message: 'Only src/http (and the composition root) imports Fastify.',
            },
          ],
        },
      ],
    },
  },
);
