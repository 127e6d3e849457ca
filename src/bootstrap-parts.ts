import type { ReadinessCheck } from './http/routes/health';
import type { Config } from './config';
import { type Core } from './core';
import { fhirError } from './fhir/errors';
import { JobQueue } from './jobs/queue';
import { BulkExports } from './bulk/export';
import { r4Model } from './fhir/model/model';
import { memoryFilter } from './search/memory-filter';
import { subsetWithMandatory } from './search/summary';
import type { Group } from 'fhir/r4';
import { SERVED_RESOURCE_TYPES } from './fhir/admin-types';
import { StorageFullError, type ResourceStore } from './storage/store';
import { TerminologyService } from './terminology/service';
import type { AnonymousCalls } from './bots/protocol';
import { LateBound } from './late-bound';
import { Accounts } from './auth/accounts';
import { Outbound } from './net/outbound';
import { BotRunner } from './bots/runner';
import { BotService } from './bots/service';

/** Parts of the composition (src/bootstrap.ts) that stand alone: what /readyz checks, and Bulk export over the core with its job handler. */

/** What `/readyz` checks: storage reachable and writable, the bundled terminology loaded. */
export function readinessChecks(store: ResourceStore, terminology: TerminologyService): Record<string, ReadinessCheck> {
  return {
    storage: async () => {
      await store.getSetting('readiness-probe').catch(() => {
        throw fhirError('ERR_STORAGE_UNAVAILABLE', {}, { headers: { 'retry-after': '5' } });
      });
      await store.writable().catch((err: unknown) => {
        if (!(err instanceof StorageFullError)) throw err;
        throw fhirError(
          'ERR_SERVER_NOT_READY',
          { check: 'storage', reason: 'the disk is full: writes fail until space is freed' },
          { headers: { 'retry-after': '60' } },
        );
      });
    },
    content: async () => {
      if (!terminology.core.find('ValueSet', 'http://hl7.org/fhir/ValueSet/administrative-gender'))
        throw new Error('the bundled R4 terminology is not loaded');
    },
  };
}

/** Bulk export over the core, its job handler registered on the queue. */
export function bulkExports({
  core,
  store,
  jobs,
  config,
}: {
  core: Core;
  store: ResourceStore;
  jobs: JobQueue;
  config: Config;
}): BulkExports {
  const compartment = r4Model().compartment('Patient') ?? {};
  const bulk = new BulkExports({
    jobs,
    store: store.bulk,
    guard: core.guard,
    isResourceType: (type) => SERVED_RESOURCE_TYPES.includes(type),
    compartmentParams: compartment,
    referencesOf: (resource) =>
      core.extractor
        .extract(resource)
        .reference.filter((r) => r.target_type !== null && r.target_id !== null)
        .map((r) => ({ param: r.param, type: r.target_type as string, id: r.target_id as string })),
    readGroup: async (id, ctx) => (await core.rest.readResource('Group', id, ctx)) as Group,
    typeFilter: (type, query) =>
      memoryFilter(type, query, { registry: core.params, extractor: core.extractor, localBases: [] }),
    subset: (resource, elements) => subsetWithMandatory(resource, r4Model(), elements),
    perProject: config.bulkExportsPerProject,
    keepMs: config.bulkExportExpiryHours * 3_600_000,
  });
  jobs.register(bulk.handler());
  return bulk;
}

/** The bot service; its sandbox process starts with the first bot deployed or run, not here. */
export function botService(
  config: Config,
  { core, accounts, anonymous }: { core: Core; accounts: Accounts; anonymous: LateBound<AnonymousCalls> },
): BotService {
  const runner = new BotRunner({
    memoryMb: config.botMemoryMb,
    sandboxMemoryMb: config.botSandboxMemoryMb,
    slotsPerProject: config.botSlotsPerProject,
    queuePerProject: config.botQueuePerProject,
  });
  return new BotService({
    rest: core.rest,
    accounts,
    runner,
    memoryMb: config.botMemoryMb,
    outputBytes: config.botOutputBytes,
    bodyLimit: config.bodyLimit,
    secrets: config.botSecrets,
    fetchAllow: config.botFetchAllow,
    outbound: new Outbound({
      allowPrivate: config.outboundAllowPrivate,
      allowTargets: config.outboundAllowTargets,
      timeoutMs: 10_000,
      maxBytes: config.botOutputBytes,
    }),
    anonymous,
  });
}
