import type { Bundle, OperationOutcome, Parameters, ValueSet } from 'fhir/r4';
import { fhir, param, query, valueOf } from './api';
import { byId, failure, h, issuesTable, onSubmit, show } from './dom';

const PAGE = 20;

/** The terminology browser: find, expand (filter, paging), validate-code, lookup, translate. */
export function terminologyBrowser(): void {
  const results = byId('vs-results');
  onSubmit(byId<HTMLFormElement>('vs-search'), results, async ({ type, text }) => {
    const by = /^(https?|urn):/.test(text) ? { url: text } : { 'name:contains': text };
    const bundle = await fhir<Bundle>(`${type}?${query({ ...by, _count: 50, _sort: 'name' })}`);
    const found = (bundle.entry ?? []).map((e) => e.resource as ValueSet);
    if (found.length === 0) return show(results, h('p', { class: 'hint' }, 'Nothing found.'));
    show(
      results,
      h(
        'table',
        {},
        h('tr', {}, h('th', {}, 'name'), h('th', {}, 'url'), h('th', {}, 'version')),
        ...found.map((r) => {
          const pick = h('a', { class: 'pick', 'data-url': r.url ?? '' }, r.title ?? r.name ?? r.id ?? '(unnamed)');
          if (type === 'ValueSet') pick.addEventListener('click', () => void openValueSet(r));
          return h('tr', {}, h('td', {}, pick), h('td', {}, r.url ?? ''), h('td', {}, r.version ?? ''));
        }),
      ),
    );
  });

  const expandForm = byId<HTMLFormElement>('expand');
  const expansion = byId('expansion');
  let offset = 0;
  const expand = async () => {
    const url = (expandForm.elements.namedItem('url') as HTMLInputElement).value.trim();
    const filter = (expandForm.elements.namedItem('filter') as HTMLInputElement).value.trim();
    try {
      const vs = await fhir<ValueSet>(`ValueSet/$expand?${query({ url, filter, offset, count: PAGE })}`);
      const contains = vs.expansion?.contains ?? [];
      const total = vs.expansion?.total;
      show(
        expansion,
        h(
          'p',
          { class: 'hint' },
          `${offset + 1}-${offset + contains.length}${total !== undefined ? ` of ${total}` : ''}`,
        ),
        h(
          'table',
          {},
          h('tr', {}, h('th', {}, 'code'), h('th', {}, 'display'), h('th', {}, 'system')),
          ...contains.map((c) =>
            h('tr', {}, h('td', {}, c.code ?? ''), h('td', {}, c.display ?? ''), h('td', {}, c.system ?? '')),
          ),
        ),
      );
    } catch (err) {
      failure(expansion, err);
    }
  };
  expandForm.addEventListener('submit', (event) => {
    event.preventDefault();
    offset = 0;
    void expand();
  });
  byId('expand-prev').addEventListener('click', () => {
    offset = Math.max(0, offset - PAGE);
    void expand();
  });
  byId('expand-next').addEventListener('click', () => {
    offset += PAGE;
    void expand();
  });

  const openValueSet = async (found: ValueSet) => {
    (expandForm.elements.namedItem('url') as HTMLInputElement).value = found.url ?? '';
    (byId<HTMLFormElement>('validate').elements.namedItem('url') as HTMLInputElement).value = found.url ?? '';
    offset = 0;
    const full = found.id ? await fhir<ValueSet>(`ValueSet/${encodeURIComponent(found.id)}`).catch(() => found) : found;
    byId('compose').textContent = JSON.stringify(full.compose ?? {}, null, 2);
    await expand();
  };

  const validateOut = byId('validate-result');
  onSubmit(byId<HTMLFormElement>('validate'), validateOut, async ({ url, system, code, display }) => {
    const answer = await fhir<Parameters>(`ValueSet/$validate-code?${query({ url, system, code, display })}`);
    const result = param(answer, 'result') === true;
    show(
      validateOut,
      h('p', { class: result ? 'ok' : 'bad', id: 'validate-verdict' }, result ? 'Valid' : 'Not valid'),
      optional('Display', param(answer, 'display')),
      optional('Message', param(answer, 'message')),
      issuesTable(param(answer, 'issues') as OperationOutcome | undefined),
    );
  });

  const lookupOut = byId('lookup-result');
  onSubmit(byId<HTMLFormElement>('lookup'), lookupOut, async ({ system, code }) => {
    show(lookupOut, parametersTable(await fhir<Parameters>(`CodeSystem/$lookup?${query({ system, code })}`)));
  });

  const translateOut = byId('translate-result');
  onSubmit(byId<HTMLFormElement>('translate'), translateOut, async ({ url, system, code, targetsystem }) => {
    const answer = await fhir<Parameters>(`ConceptMap/$translate?${query({ url, system, code, targetsystem })}`);
    show(
      translateOut,
      h(
        'p',
        { class: param(answer, 'result') === true ? 'ok' : 'bad' },
        param(answer, 'result') === true ? 'Translated' : 'No translation',
      ),
      parametersTable(answer),
    );
  });
}

function optional(label: string, value: unknown): HTMLElement | undefined {
  return value === undefined ? undefined : h('p', {}, h('strong', {}, `${label}: `), String(value));
}

/** A Parameters answer as name/value rows, parts indented under their parameter. */
function parametersTable(body: Parameters): HTMLElement {
  const rows: HTMLElement[] = [];
  const add = (list: Parameters['parameter'], depth: number) => {
    for (const p of list ?? []) {
      const value = valueOf(p);
      const text = value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
      rows.push(h('tr', {}, h('td', { style: `padding-left:${0.4 + depth}rem` }, p.name), h('td', {}, text)));
      add(p.part, depth + 1);
    }
  };
  add(body.parameter, 0);
  return h('table', {}, h('tr', {}, h('th', {}, 'name'), h('th', {}, 'value')), ...rows);
}
