import type { FhirPathPool } from './fhir/fhirpath/pool';
import type { Resource } from 'fhir/r4';
import type { Config } from './config';
import type { Accounts } from './auth/accounts';
import type { BotService } from './bots/service';
import type { AuthService } from './auth/oauth';
import type { GraphQLService } from './graphql/service';
import type { Repository } from './storage/repository';
import type { JobQueue } from './jobs/queue';
import type { RestService } from './rest/rest-service';
import type { SearchService } from './search/search-service';
import type { Subscriptions } from './subscriptions/subscriptions';
import type { TerminologyService } from './terminology/service';
import type { ResourceValidator } from './validation/validator';

/** What production operation handlers are given (the framework passes it through untouched). */
export interface AppServices {
  config: Config;
  repository: Repository;
  terminology: TerminologyService;
  /** Where FHIRPath users wrote is evaluated, bounded (criteria, stored invariants, `fhirpath:` arguments). */
  fhirpath: FhirPathPool;
  /** Resource validation ($validate, and validation on write). */
  validator: ResourceValidator;
  /** The checks every write of a resource gets before it is stored (package import uses them too). */
  checkResource(type: string, resource: Resource, project: string): void;
  /** Sign-in and tokens; the accounts behind them. */
  auth: AuthService;
  accounts: Accounts;
  /** FHIR GraphQL ($graphql). */
  graphql: Pick<GraphQLService, 'run'>;
  /** Reads and searches as the REST API does them: within the request's project and its principal's grants. */
  rest: RestService;
  search: SearchService;
  /** The durable job queue (bulk export and other background work). */
  jobs: JobQueue;
  /** Bots: $deploy and $execute, their sandbox (src/bots). */
  bots: BotService;
  /** R4 Subscriptions: matching, delivery, websocket bindings. */
  subscriptions: Subscriptions;
}
