import type { Bundle, CapabilityStatement, Resource } from 'fhir/r4';
import { fhir } from './api';
import { byId, failure, h, onSubmit, show } from './dom';
import { labelOf } from './labels';

/** The resource browser: search a type with parameters, view a resource's JSON and its history. */
export function resourceBrowser(): void {
  void fhir<CapabilityStatement>('metadata')
    .then((cs) =>
      byId('resource-types').replaceChildren(
        ...(cs.rest?.[0]?.resource ?? []).map((r) => h('option', { value: r.type })),
      ),
    )
    .catch(() => undefined);

  const results = byId('resource-results');
  onSubmit(byId<HTMLFormElement>('resource-search'), results, async ({ type, params }) => {
    const search = params.replace(/^\?/, '');
    const bundle = await fhir<Bundle>(`${encodeURIComponent(type)}${search ? `?${search}` : ''}`);
    showBundle(results, bundle, `${bundle.total ?? bundle.entry?.length ?? 0} found`);
  });
}

function showBundle(target: HTMLElement, bundle: Bundle, caption: string): void {
  const entries = bundle.entry ?? [];
  show(
    target,
    h('p', { class: 'hint', id: target.id === 'resource-results' ? 'resource-count' : '' }, caption),
    h(
      'table',
      {},
      h('tr', {}, h('th', {}, 'resource'), h('th', {}, 'what'), h('th', {}, 'version'), h('th', {}, 'updated')),
      ...entries.map((e) => {
        const r = e.resource;
        if (!r)
          return h(
            'tr',
            {},
            h('td', {}, e.request?.url ?? e.fullUrl ?? '(deleted)'),
            h('td', {}, ''),
            h('td', {}, e.response?.status ?? ''),
            h('td', {}, ''),
          );
        const link = h('a', { class: 'pick' }, `${r.resourceType}/${r.id}`);
        link.addEventListener('click', () => view(r));
        const updated = r.meta?.lastUpdated?.replace('T', ' ').slice(0, 19) ?? '';
        return h(
          'tr',
          {},
          h('td', { class: 'id' }, link),
          h('td', { class: 'what' }, labelOf(r)),
          h('td', {}, r.meta?.versionId ?? ''),
          h('td', { class: 'nowrap' }, updated),
        );
      }),
    ),
  );
}

function view(resource: Resource): void {
  byId('resource-title').textContent = `${resource.resourceType}/${resource.id}`;
  byId('resource-json').textContent = JSON.stringify(resource, null, 2);
  const history = byId('resource-history');
  const list = byId('resource-history-list');
  list.replaceChildren();
  history.hidden = false;
  history.onclick = () => {
    fhir<Bundle>(`${resource.resourceType}/${encodeURIComponent(resource.id ?? '')}/_history`)
      .then((bundle) => showBundle(list, bundle, `${bundle.entry?.length ?? 0} versions`))
      .catch((err: unknown) => failure(list, err));
  };
}
