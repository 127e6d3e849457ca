import type { Config } from './config';
import type { Repository } from './storage/repository';
import type { TerminologyService } from './terminology/service';

/** What production operation handlers are given (the framework passes it through untouched). */
export interface AppServices {
  config: Config;
  repository: Repository;
  terminology: TerminologyService;
}
