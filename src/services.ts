import type { Config } from './config';
import type { Repository } from './storage/repository';

/** What production operation handlers are given (the framework passes it through untouched). */
export interface AppServices {
  config: Config;
  repository: Repository;
}
