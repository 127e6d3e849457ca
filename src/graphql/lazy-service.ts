import type { GraphQLAnswer, GraphQLService, GraphQLServiceDeps } from './service';

/**
 * The GraphQL service as the server holds it: the service and the graphql library load with the
 * first query, not at start (loading them is about a tenth of the start-up).
 */
export class LazyGraphQL implements Pick<GraphQLService, 'run'> {
  private loaded?: Promise<GraphQLService>;

  constructor(private readonly deps: GraphQLServiceDeps) {}

  async run(...args: Parameters<GraphQLService['run']>): Promise<GraphQLAnswer> {
    this.loaded ??= import('./service').then(({ GraphQLService }) => new GraphQLService(this.deps));
    return (await this.loaded).run(...args);
  }
}
