import type { Bundle, OperationOutcome } from 'fhir/r4';
import type { BulkStore } from '../storage/bulk';

/** An export's files as they are written: NDJSON parts of a bounded size, the entries a deletion or a refusal leaves, and the elements kept of each type. */

/** Resources per stored part of a file (and per snapshot read). */
export const PART = 1000;

export interface ExportFile {
  file: string;
  type: string;
  count: number;
}

/** Appends NDJSON lines to a file in parts of PART lines. */
export class FileWriter {
  count = 0;
  private lines: string[] = [];
  private part = 0;

  constructor(
    private readonly target: {
      store: BulkStore;
      job: string;
      file: string;
      type: string;
      /** Aborted when the export was cancelled (DELETE): no part is written after its files were deleted. */
      signal: AbortSignal;
    },
  ) {}

  async add(line: string): Promise<void> {
    this.lines.push(line);
    this.count++;
    if (this.lines.length >= PART) await this.flush();
  }

  async finish(): Promise<ExportFile | undefined> {
    await this.flush();
    return this.count === 0 ? undefined : { file: this.target.file, type: this.target.type, count: this.count };
  }

  private async flush(): Promise<void> {
    if (this.lines.length === 0) return;
    if (this.target.signal.aborted) throw this.target.signal.reason;
    const stored = await this.target.store.putPart(this.target.job, this.target.file, {
      part: ++this.part,
      count: this.lines.length,
      content: `${this.lines.join('\n')}\n`,
    });
    if (!stored) throw new Error('the export was cancelled (DELETE) while it ran');
    this.lines = [];
  }
}

/** The `_elements` that apply to one type: the bare names and its own `Type.name` ones; undefined when none do. */
export function elementsOf(elements: string[], type: string): string[] | undefined {
  const names = elements.flatMap((e) =>
    !e.includes('.') ? [e] : e.startsWith(`${type}.`) ? [e.slice(type.length + 1)] : [],
  );
  return names.length > 0 ? names : undefined;
}

export function deletion(type: string, id: string): Bundle {
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: [{ request: { method: 'DELETE', url: `${type}/${id}` } }],
  };
}

export function refusal(text: string): OperationOutcome {
  return {
    resourceType: 'OperationOutcome',
    issue: [{ severity: 'warning', code: 'not-supported', details: { text } }],
  };
}
