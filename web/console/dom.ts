import type { OperationOutcome } from 'fhir/r4';
import { CallError } from './api';

type Child = Node | string | number | boolean | null | undefined;

/** A tiny element builder: h('td', { class: 'ok' }, 'text', child). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, value);
  for (const child of children)
    if (child !== null && child !== undefined) el.append(child instanceof Node ? child : String(child));
  return el;
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

export function show(target: HTMLElement, ...children: Child[]): void {
  target.replaceChildren(
    ...children
      .filter((c): c is Node | string => c !== null && c !== undefined && c !== false)
      .map((c) => (c instanceof Node ? c : String(c))),
  );
}

/** An OperationOutcome's issues as a table: severity, code, message, where. */
export function issuesTable(outcome: OperationOutcome | undefined): HTMLElement | undefined {
  if (!outcome?.issue?.length) return undefined;
  return h(
    'table',
    { class: 'issues' },
    h('tr', {}, h('th', {}, 'severity'), h('th', {}, 'code'), h('th', {}, 'message'), h('th', {}, 'where')),
    ...outcome.issue.map((i) =>
      h(
        'tr',
        { class: `issue-${i.severity}` },
        h('td', {}, i.severity),
        h('td', {}, i.code),
        h('td', {}, i.details?.text ?? i.diagnostics ?? ''),
        h('td', {}, (i.expression ?? i.location ?? []).join(', ')),
      ),
    ),
  );
}

/** What went wrong, readably: the status and the server's issues. */
export function failure(target: HTMLElement, err: unknown): void {
  if (err instanceof CallError) {
    show(
      target,
      h(
        'p',
        { class: 'bad' },
        err.status === 401 ? 'HTTP 401: this server needs a token (paste one above).' : `HTTP ${err.status}`,
      ),
      issuesTable(err.outcome) ?? err.message,
    );
  } else {
    show(target, h('p', { class: 'bad' }, err instanceof Error ? err.message : String(err)));
  }
}

/** Reads a form's named fields as trimmed strings. */
export function fields(form: HTMLFormElement): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of new FormData(form)) out[name] = String(value).trim();
  return out;
}

/** Runs `work` when the form is submitted, with the form's fields; failures are shown in `out`. */
export function onSubmit(
  form: HTMLFormElement,
  out: HTMLElement,
  work: (values: Record<string, string>) => Promise<void>,
): void {
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    show(out, h('p', { class: 'hint' }, 'Working...'));
    work(fields(form)).catch((err: unknown) => failure(out, err));
  });
}
