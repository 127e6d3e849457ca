import { transform, type TransformFailure } from 'esbuild';

/**
 * A bot's source as the sandbox runs it: CommonJS (`exports.handler`), from JavaScript or, when the
 * file name ends `.ts`, TypeScript (types stripped by esbuild, nothing type-checked).
 * ES module syntax (`export async function handler`) and `import ... from '@medplum/core'` become
 * `exports` and `require`, which the sandbox's prelude provides.
 */
export type Compiled = { ok: true; code: string } | { ok: false; error: string };

export async function compileBot(source: string, filename: string): Promise<Compiled> {
  try {
    const out = await transform(source, {
      loader: /\.(c|m)?ts$/i.test(filename) ? 'ts' : 'js',
      format: 'cjs',
      target: 'es2022',
      sourcefile: filename,
      logLevel: 'silent',
    });
    return { ok: true, code: out.code };
  } catch (err) {
    const first = (err as TransformFailure).errors?.[0];
    if (!first) return { ok: false, error: err instanceof Error ? err.message : String(err) };
    const where = first.location
      ? `${filename} line ${first.location.line}, column ${first.location.column + 1}: `
      : '';
    return { ok: false, error: `${where}${first.text}` };
  }
}
